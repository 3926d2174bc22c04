"""RequesterNotifier: how a run's requester hears that it ended or needs them — a mention in its thread, a direct
message, or both — and the direct message, sent exactly once per (run, reason).

The choice is the run's `notify=` (stored in `Run.policy` as `notify_requester`), else the person's App Home
default (`user_preferences`), else the thread. A direct message is claimed in `requester_notices` (unique per run
and reason) before it is sent and marked after: a second call, a retried watcher pass or the recovery of an
unposted transition claims nothing and sends nothing. A Slack error is an item of the `requester_dm` background
pass (recorded, retried with backoff by `retry_unsent`); one no retry can help (the person cannot be messaged) is
parked at once, and the message goes in the run's thread with a mention instead. A crash between Slack taking
the message and the mark costs one repeated message (the next pass sends the claimed one again): better twice
than never, when the person chose not to be mentioned.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.background import GiveUp
from bot.catalog.policy import NOTIFY_REQUESTER
from bot.grammar import Notify
from bot.notify.render import dm_text, end_detail, is_notify, tells_requester
from bot.runs.deps import RunDeps
from bot.runs.thread import RunThread
from bot.slack.blocks import escape, mention
from bot.slack.client import without_rate_limit_retries
from storage import repos
from storage.db import SessionFactory
from storage.models import Run, utcnow

log = logging.getLogger(__name__)

DM_KIND = "requester_dm"  # the background pass (bot.background) of direct messages to requesters
# A claimed message younger than this may be being sent right now by the call that claimed it.
RESEND_AFTER = timedelta(seconds=10)
# What Slack answers when this person cannot get a message from the bot at all: retrying changes nothing.
UNREACHABLE = frozenset(
    {
        "cannot_dm_bot",
        "user_not_found",
        "channel_not_found",
        "user_disabled",
        "account_inactive",
        "not_in_channel",
        "is_archived",
        "restricted_action",
        "messages_tab_disabled",
        "missing_scope",
    }
)


def notify_default(sessions: SessionFactory, user: str) -> Notify:
    """The person's App Home default, else the thread (a stored value not one of the three counts as none)."""
    with sessions() as s:
        stored = repos.get_notify_preference(s, user=user)
    return stored if is_notify(stored) else "thread"


class RequesterNotifier:
    """Decides how a run's requester hears of it, and sends the direct messages, once each."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread
        # A 429 is not waited out inside a watcher tick: the message is retried by the next pass instead.
        self._client = without_rate_limit_retries(deps.client) if isinstance(deps.client, WebClient) else deps.client
        self.resend_after = RESEND_AFTER

    def mode(self, run: Run) -> Notify:
        """The run's `notify=`, else its requester's App Home default, else `thread`."""
        chosen = (run.policy or {}).get(NOTIFY_REQUESTER)
        if is_notify(chosen):
            return chosen
        return notify_default(self.deps.sessions, run.requester)

    def mention(self, run: Run) -> str:
        """The requester's @-mention for the thread, or an empty string when they chose a direct message only."""
        return "" if self.mode(run) == "dm" else mention(run.requester)

    def tell(self, run: Run, reason: str, detail: str = "") -> bool:
        """Send the requester the direct message about `reason` if they chose one, once; whether it went now.

        Never raises: a Slack error is recorded as a failing background item and retried (bot.background)."""
        if run.id is None or self.mode(run) == "thread":
            return False
        text = dm_text(
            reason=reason,
            run_name=run.name,
            recipe=run.recipe_name,
            detail=detail,
            link=self.thread.permalink(run.channel, run.card_ts),
        )
        with self.deps.sessions() as s:
            notice_id = repos.claim_requester_notice(s, run_id=run.id, reason=reason, text=text)
        if notice_id is None:
            return False  # told already, or being told: one message per run and reason
        return self._attempt(notice_id, run, reason, text)

    def tell_end(self, run: Run, status: str) -> bool:
        """`tell` the run's end (`status`, read with its row: metrics, failure) if it is one the requester hears of."""
        if not tells_requester(status, run.failure):
            return False
        detail = end_detail(status, metrics=run.last_metrics, contract=run.eval_contract, failure=run.failure)
        return self.tell(run, status, detail)

    def retry_unsent(self) -> int:
        """Claimed messages that did not go (a Slack error, a process that died), sent now where due; how many."""
        with self.deps.sessions() as s:
            # Claimed with the database's clock (storage.models.utcnow), so compared with it, not the watcher's.
            unsent = repos.unsent_requester_notices(s, before=utcnow() - self.resend_after)
        sent = 0
        for notice, run in unsent:
            sent += self._attempt(notice.id or 0, run, notice.reason, notice.text)
        return sent

    def _attempt(self, notice_id: int, run: Run, reason: str, text: str) -> bool:
        tried = self.deps.items.attempt(
            DM_KIND,
            f"{run.id}:{reason}",
            partial(self._send, notice_id, run, text),
            run_id=run.id,
            tell=partial(self._in_thread_instead, notice_id, run, text),
        )
        return tried.ok

    def _send(self, notice_id: int, run: Run, text: str) -> None:
        try:
            # To a user id: Slack posts in the bot's direct messages with that person.
            resp = self._client.chat_postMessage(channel=run.requester, text=text, unfurl_links=False)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error in UNREACHABLE:
                raise GiveUp(f"Slack cannot deliver a direct message to {run.requester}: {error}") from exc
            raise
        with self.deps.sessions() as s:
            repos.mark_requester_notice_sent(s, notice_id=notice_id, channel=str(resp["channel"]), ts=str(resp["ts"]))

    def _in_thread_instead(self, notice_id: int, run: Run, text: str, error: str) -> None:
        """The message cannot go as a direct message: the run's thread hears it, with the mention it replaced."""
        ts = self.thread.post_thread(
            run,
            f"{mention(run.requester)} the bot could not send you a direct message (`{escape(error[:200])}`), so "
            f"here it is:\n{text}",
            purpose="dm_fallback",
        )
        with self.deps.sessions() as s:
            repos.mark_requester_notice_sent(s, notice_id=notice_id, channel=run.channel, ts=ts)
