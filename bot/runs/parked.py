"""Telling that a run's background item was given up (parked): in the run's thread where it can be, else the
requester by direct message. What is parked is recorded in `background_item_failures` either way."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from bot.runs.deps import RunDeps
from bot.runs.thread import RunThread
from bot.slack.blocks import escape
from storage.models import Run

log = logging.getLogger(__name__)


def tell_parked(deps: RunDeps, thread: RunThread, run: Run, *, what: str, error: str) -> None:
    """Say that `what` (about `run`) is given up after its retries, and why, where Slack lets the bot say it."""
    text = (
        f":no_entry: The bot gave up {what} for `{escape(run.name)}` after {deps.items.policy.limit} attempts: "
        f"`{escape(error[:300])}`. The other runs go on; this one needs a person (see the bot's log and "
        "`finetune_bot_background_items` in /metrics)."
    )
    if run.card_ts:
        try:
            thread.post_thread(run, text, purpose="parked")
            return
        except SlackApiError as exc:  # the item is bad because of its channel: the requester hears it instead
            log.warning("parked %s: its thread cannot be posted to (%s); telling the requester", run.name, exc)
    where = f" (in <#{escape(run.channel)}>)" if run.channel else ""
    # chat.postMessage to a user id posts in the bot's direct messages with that user.
    deps.client.chat_postMessage(channel=run.requester, text=text + where)


def undeliverable(error: str, channel: str) -> dict[str, str]:
    """The failure shown on the card and the run's row of a run whose card could never be posted."""
    return {
        "kind": "undeliverable",
        "title": "Could not post in its channel",
        "evidence": error[:300],
        # Plain text: the card escapes a failure's fields when it shows them.
        "hint": f"the bot cannot post in <#{channel}>: /invite the bot there, or run it again in a channel the bot "
        "is in",
    }
