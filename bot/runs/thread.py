"""A run's card and thread: the one status card (edited in place) and every post in its thread, exactly once.

Every capability that tells something about a run posts through `RunThread`: status transitions (recorded
before they are posted, so none is lost), warnings, logs, comparisons, approval requests, registrations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.runs.card import CardView, card_text, polyaxon_url, render_card
from bot.runs.card_content import card_content
from bot.runs.card_edits import CardEdits, content_digest
from bot.runs.deps import RunDeps
from bot.runs.errors import RunError
from bot.slack.blocks import escape
from bot.slack.client import without_rate_limit_retries
from bot.slack.threads import find_thread_post, permalink
from storage import repos
from storage.models import Run

log = logging.getLogger(__name__)


# What Slack answers when the card (or its thread) is gone: deleted, or a bot restarted against another workspace.
GONE_ERRORS = frozenset({"message_not_found", "thread_not_found"})
CARD_REPLACED = (
    ":information_source: This run's earlier card is gone (deleted, or this bot now talks to another Slack "
    "workspace), so this is its card now; what was said in the old thread stays there."
)

# Message metadata on each status post: how a restarted bot tells whether a post went out before a crash.
TRANSITION_EVENT = "finetune_status_event"


# A card of another kind of run (a sweep's): its notification text and blocks.
CardRenderer = Callable[[Run], tuple[str, list[dict[str, Any]]]]


def transition_metadata(event_id: int, status: str) -> dict[str, Any]:
    """Slack message metadata naming the status event a thread post tells."""
    return {"event_type": TRANSITION_EVENT, "event_payload": {"event_id": event_id, "status": status}}


class RunThread:
    """Posts and edits a run's card, posts in its thread, and records and tells its status transitions."""

    def __init__(self, deps: RunDeps) -> None:
        self.deps = deps
        self.edits = CardEdits()
        # Card edits never wait out a 429 in the caller (a watcher tick, a command): the card stays pending.
        self._card_client = (
            without_rate_limit_retries(deps.client) if isinstance(deps.client, WebClient) else deps.client
        )
        # Cards of other kinds of run, by `Run.kind` (a sweep's card is its service's); the rest get the run card.
        self.card_renderers: dict[str, CardRenderer] = {}

    # --- links and the card's content -------------------------------------------------------------

    def permalink(self, channel: str, ts: str | None) -> str | None:
        """A message's permalink (chat.getPermalink), or None."""
        return permalink(self.deps.client, channel, ts)

    def polyaxon_url(self, run: Run) -> str | None:
        """The run's page in Polyaxon's UI."""
        return polyaxon_url(self.deps.settings.polyaxon, run)

    def card_view(self, run: Run) -> CardView:
        """The card's content for a stored run (bot.runs.card_content)."""
        return card_content(self.deps, run)

    def render(self, run: Run) -> tuple[str, list[dict[str, Any]]]:
        """The card's notification text and blocks, by the renderer of the run's kind."""
        renderer = self.card_renderers.get(run.kind)
        if renderer is not None:
            return renderer(run)
        view = self.card_view(run)
        return card_text(view), render_card(view)

    # --- the card -----------------------------------------------------------------------------------

    def post_card(self, run: Run) -> None:
        """Post the run's one card in the channel and remember its ts (the thread for everything else).

        A run recorded with a thread and no card yet (a serving check: the version's thread) gets its card in
        that thread, and everything about it goes there too.
        """
        text, blocks = self.render(run)
        in_thread = run.thread_ts if run.card_ts is None and run.thread_ts else None
        kwargs: dict[str, Any] = {"channel": run.channel, "text": text, "blocks": blocks}
        if in_thread:
            kwargs["thread_ts"] = in_thread
        resp = self.deps.client.chat_postMessage(**kwargs)
        ts = str(resp["ts"])
        with self.deps.sessions() as s:
            fresh = self.reload(s, run)
            repos.update_run(s, fresh, card_ts=ts, thread_ts=in_thread or ts)
            repos.record_posted_message(
                s, channel=run.channel, ts=ts, purpose="card", run_id=run.id, thread_ts=in_thread
            )
        run.card_ts, run.thread_ts = ts, in_thread or ts
        self.edits.sent(run.id or 0, content_digest(text, blocks))

    def update_card(self, run: Run, *, force: bool = False) -> bool:
        """Edit the card in place (chat.update) if its content changed; whether it was edited now.

        Paced per card unless `force` (a transition) and never in a channel Slack rate-limited: such an edit
        stays pending and `flush_cards` sends the card's newest state later (bot.runs.card_edits).
        """
        card_ts = run.card_ts
        if not card_ts:
            return False
        if run.failure is not None or run.first_attempt_id is not None:
            # Every attempt of a retried run edits the first attempt's card: it shows the newest attempt. Only a
            # failed run or a later attempt can have one, so other card edits skip the lookup.
            with self.deps.sessions() as s:
                newest = repos.newest_attempt_on_card(s, channel=run.channel, card_ts=card_ts)
            if newest is not None and newest.id != run.id:
                run = newest
        key = run.id or 0
        if not self.edits.may_send(key, run.channel, force=force):
            return False
        text, blocks = self.render(run)
        try:
            return self.edits.send(self._card_client, key, channel=run.channel, ts=card_ts, text=text, blocks=blocks)
        except SlackApiError as exc:
            if exc.response.get("error") not in GONE_ERRORS:
                raise
            self.replace_card(run)
            return True

    def flush_cards(self) -> int:
        """Send the pending card edits that may go now (each card's newest state); how many were sent."""
        return self.edits.flush(partial(_stored, self.deps), self.update_card)

    def replace_card(self, run: Run) -> None:
        """The card is gone: post a fresh one (the run's thread from now on) and say so in it."""
        log.warning("the card of %s is gone; posting a new one", run.name)
        self.post_card(run)
        self.post_thread(run, CARD_REPLACED, purpose="card_replaced")

    # --- the thread ---------------------------------------------------------------------------------

    def post_thread(
        self,
        run: Run,
        text: str,
        *,
        purpose: str,
        blocks: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
        broadcast: bool = False,
    ) -> str:
        """Post in the run's thread (never a new top-level message; also sent to the channel when `broadcast`).

        When the card is gone (deleted, or another workspace), a fresh card is posted first and the post
        goes in its thread. Returns the message ts.
        """
        kwargs: dict[str, Any] = {"channel": run.channel, "thread_ts": run.thread_ts or run.card_ts, "text": text}
        if blocks:
            kwargs["blocks"] = blocks
        if metadata:
            kwargs["metadata"] = metadata
        if broadcast and kwargs["thread_ts"]:
            kwargs["reply_broadcast"] = True
        try:
            resp = self.deps.client.chat_postMessage(**kwargs)
        except SlackApiError as exc:
            if exc.response.get("error") not in GONE_ERRORS or not kwargs["thread_ts"]:
                raise
            self.replace_card(run)
            kwargs["thread_ts"] = run.thread_ts
            resp = self.deps.client.chat_postMessage(**kwargs)
        ts = str(resp["ts"])
        with self.deps.sessions() as s:
            repos.record_posted_message(
                s, channel=run.channel, ts=ts, purpose=purpose, run_id=run.id, thread_ts=run.thread_ts
            )
        return ts

    def edit_thread_post(self, run: Run, ts: str, *, text: str, blocks: list[dict[str, Any]]) -> bool:
        """Edit a post of the run's thread in place (chat.update); False when it is gone (the caller posts anew)."""
        try:
            self.deps.client.chat_update(channel=run.channel, ts=ts, text=text, blocks=blocks)
        except SlackApiError as exc:
            if exc.response.get("error") not in GONE_ERRORS:
                raise
            return False
        return True

    def upload_to_thread(self, run: Run, *, content: bytes, filename: str, title: str, comment: str) -> None:
        """Attach a file in the run's thread (files_upload_v2)."""
        for attempt in (1, 2):
            try:
                self.deps.client.files_upload_v2(
                    channel=run.channel,
                    thread_ts=run.thread_ts or run.card_ts,
                    content=content,
                    filename=filename,
                    title=title,
                    initial_comment=comment,
                )
                return
            except SlackApiError as exc:
                if exc.response.get("error") not in GONE_ERRORS or attempt == 2:
                    raise
                self.replace_card(run)

    def find_thread_post(self, run: Run, event_type: str, **payload: Any) -> str | None:
        """The ts of a post in the run's thread whose message metadata is `event_type` with `payload`, or None."""
        return find_thread_post(
            self.deps.client,
            channel=run.channel,
            thread_ts=run.thread_ts or run.card_ts,
            event_type=event_type,
            payload=payload,
            label=run.name,
        )

    # --- status transitions -------------------------------------------------------------------------

    def transition(
        self,
        run: Run,
        *,
        status: str,
        text: str,
        message: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
        at: datetime | None = None,
        **fields: Any,
    ) -> Run:
        """Record a status change (once), tell it in the thread, edit the card; returns the fresh run.

        The event is committed before the post and marked after it, so a crash in between leaves an
        unposted event that the watcher's next tick tells: no transition is lost.
        """
        with self.deps.sessions() as s:
            fresh = self.reload(s, run)
            if fields:
                repos.update_run(s, fresh, **fields)
            event = repos.record_status(s, fresh, status=status, message=message, at=at)
            event_id = event.id if event is not None else None
        if event_id is None:
            return fresh
        self.tell_transition(fresh, event_id=event_id, status=status, text=text, blocks=blocks)
        self.update_card(fresh, force=True)
        return fresh

    def tell_transition(
        self,
        run: Run,
        *,
        event_id: int,
        status: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        recovering: bool = False,
    ) -> bool:
        """Post a recorded status event in the run's thread and note the post; True when posted now.

        `recovering`: an earlier process may have died after the post and before noting it. Slack is then
        the only witness: the post carries the event's id in its message metadata, so the thread is read
        back first and the event is noted as told instead of being posted twice.
        """
        ts = self.find_thread_post(run, TRANSITION_EVENT, event_id=event_id) if recovering else None
        posted = ts is None
        if ts is None:
            ts = self.post_thread(
                run, text, purpose="transition", blocks=blocks, metadata=transition_metadata(event_id, status)
            )
        with self.deps.sessions() as s:
            repos.mark_status_event_posted(s, event_id=event_id, ts=ts)
            if not posted and repos.get_posted_message(s, channel=run.channel, ts=ts) is None:
                repos.record_posted_message(
                    s, channel=run.channel, ts=ts, purpose="transition", run_id=run.id, thread_ts=run.thread_ts
                )
        return posted

    @staticmethod
    def reload(s: Any, run: Run) -> Run:
        """The run's row in this session (RunError when it is gone)."""
        fresh = repos.get_run(s, run_id=run.id or 0)
        if fresh is None:
            raise RunError(f"run {escape(run.name)} disappeared from the database")
        return fresh


def _stored(deps: RunDeps, run_id: int) -> Run | None:
    with deps.sessions() as s:
        return repos.get_run(s, run_id=run_id)
