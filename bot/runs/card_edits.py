"""When a card may be edited: at Slack's pace, only when its content changed, the newest content winning.

Slack allows about one `chat.update` per second per channel and answers 429 with a Retry-After beyond that.
A card edited less than `min_interval_s` ago, or in a channel Slack asked to wait, is not edited now but kept
pending: `due()` hands it back once it may go, and the card is rendered then, so the newest state is what
Slack shows and in-between states are never sent. A 429 never blocks the caller (no waiting retry): the card
stays pending and the channel waits as long as Slack said. Pending edits live in this process only: a
restarted bot edits a card again at its next change (every transition edits it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_INTERVAL_S = 3.0  # per card: well under Slack's one edit per second per channel, however many cards change
REMEMBERED = 5000  # cards whose last sent content is remembered (least recently edited forgotten first)


def content_digest(text: str, blocks: list[dict[str, Any]]) -> str:
    """What a card shows, as a short digest: the same digest means the same card."""
    body = json.dumps([text, blocks], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:32]


class CardEdits:
    """The edit throttle of every card: per card, per rate-limited channel, and what each card last showed."""

    def __init__(
        self, *, min_interval_s: float = MIN_INTERVAL_S, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.min_interval_s = min_interval_s
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._sent: OrderedDict[int, tuple[float, str]] = OrderedDict()  # run id -> (when, content digest)
        self._pending: dict[int, str] = {}  # run id -> its channel
        self._channel_wait: dict[str, float] = {}  # channel -> when Slack lets the bot edit there again

    def may_send(self, run_id: int, channel: str, *, force: bool = False) -> bool:
        """Whether the card may be edited now; when not, it is kept pending (and `due` returns it later)."""
        now = self.monotonic()
        with self._lock:
            waiting = self._channel_wait.get(channel, 0.0) > now
            last = self._sent.get(run_id)
            recent = last is not None and now - last[0] < self.min_interval_s
            if waiting or (recent and not force):
                self._pending[run_id] = channel
                return False
            return True

    def unchanged(self, run_id: int, digest: str) -> bool:
        """Whether Slack already shows this content for the card (nothing to send; nothing pending either)."""
        with self._lock:
            last = self._sent.get(run_id)
            if last is not None and last[1] == digest:
                self._pending.pop(run_id, None)
                return True
            return False

    def sent(self, run_id: int, digest: str) -> None:
        """The card now shows `digest` (posted or edited)."""
        with self._lock:
            self._sent[run_id] = (self.monotonic(), digest)
            self._sent.move_to_end(run_id)
            while len(self._sent) > REMEMBERED:
                self._sent.popitem(last=False)
            self._pending.pop(run_id, None)

    def rate_limited(self, run_id: int, channel: str, retry_after_s: float) -> None:
        """Slack answered 429: the channel waits `retry_after_s`, and the card's newest state goes after."""
        with self._lock:
            self._channel_wait[channel] = self.monotonic() + max(retry_after_s, 1.0)
            self._pending[run_id] = channel

    def forget(self, run_id: int) -> None:
        """The card is no longer to be edited (its run is gone)."""
        with self._lock:
            self._pending.pop(run_id, None)

    def send(
        self, client: WebClient, run_id: int, *, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]
    ) -> bool:
        """Edit the card unless Slack already shows this content; False when unchanged or rate-limited (then
        pending). `client` must not wait out a 429 itself. Other Slack errors are the caller's."""
        digest = content_digest(text, blocks)
        if self.unchanged(run_id, digest):
            return False
        try:
            client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
        except SlackApiError as exc:
            if exc.response.status_code != 429:
                raise
            headers = {k.lower(): v for k, v in (exc.response.headers or {}).items()}
            retry_after = float(headers.get("retry-after") or 1)
            log.info("card %s in %s: Slack asked to wait %.0f s; its newest state goes then", ts, channel, retry_after)
            self.rate_limited(run_id, channel, retry_after)
            return False
        self.sent(run_id, digest)
        return True

    def flush(self, load: Callable[[int], T | None], update: Callable[[T], bool]) -> int:
        """Edit every pending card that may go now with its newest state (`load`ed afresh); how many went."""
        done = 0
        for run_id in self.due():
            run = load(run_id)
            if run is None:
                self.forget(run_id)
                continue
            done += int(update(run))
        return done

    def due(self) -> list[int]:
        """Pending cards that may be edited now, oldest pending first."""
        now = self.monotonic()
        with self._lock:
            for channel in [c for c, until in self._channel_wait.items() if until <= now]:
                del self._channel_wait[channel]
            return [
                run_id
                for run_id, channel in self._pending.items()
                if channel not in self._channel_wait
                and now - self._sent.get(run_id, (float("-inf"), ""))[0] >= self.min_interval_s
            ]

    def pending(self) -> int:
        """How many cards wait for an edit."""
        with self._lock:
            return len(self._pending)
