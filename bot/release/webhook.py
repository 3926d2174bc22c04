"""The signed release webhook: every stage change is queued with its stage-change row (an outbox, in the same
transaction) and delivered from the watcher's tick, so a receiver that is down never blocks an approval.

Each POST carries the JSON event, `X-Finetune-Event`, `Idempotency-Key` (the event's id: a receiver that saw
it answers 2xx again and does nothing) and, signed as Slack signs its requests, `X-Finetune-Request-Timestamp:
<unix seconds>` and `X-Finetune-Signature: v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}" with
FINETUNE_RELEASE_WEBHOOK_SECRET>`: a receiver refuses a request signed more than 5 minutes ago (a replay) without
parsing the body (`verify`, which docs/operator-guide.md shows). A failed POST is retried with exponential backoff,
the same body and key, signed anew; an event is delivered at most once by the bot (marked delivered after the
2xx), at least once while the receiver lives.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import httpx

from bot.background import BackgroundItems, RetryPolicy
from bot.redact import redact
from storage import repos
from storage.db import SessionFactory
from storage.models import ReleaseEvent

log = logging.getLogger(__name__)

EVENT_TYPE = "model.stage_changed"
TIMEOUT_S = 5.0
FIRST_RETRY_S = 2.0
MAX_RETRY_S = 600.0
# After this many failed attempts (about 2.5 hours of backoff) the event is given up and said so.
MAX_ATTEMPTS = 20
# The background items (bot.background) of the webhook: an event failing by itself, and telling of a failure.
WEBHOOK_EVENT = "webhook_event"
WEBHOOK_TOLD = "webhook_told"
TIMESTAMP_HEADER = "X-Finetune-Request-Timestamp"
SIGNATURE_HEADER = "X-Finetune-Signature"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """`v0=` and the hex HMAC-SHA256 of `v0:{timestamp}:{body}`, over the body's exact bytes (as Slack signs)."""
    base = b"v0:" + timestamp.encode("ascii") + b":" + body
    return "v0=" + hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()


def verify(
    secret: str, *, timestamp: str | None, signature: str | None, body: bytes, now: float, tolerance_s: float = 300
) -> bool:
    """What a receiver checks: the bot signed these exact body bytes at a timestamp within `tolerance_s` (5 minutes)
    of `now`, so an older request is a replay; compared in constant time; missing or malformed headers refused."""
    if not timestamp or not signature or len(timestamp) > 12 or not (timestamp.isascii() and timestamp.isdigit()):
        return False
    if abs(now - int(timestamp)) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body).encode(), signature.encode())


def encode(payload: Mapping[str, Any]) -> bytes:
    """The body as sent: compact, keys sorted, so the signature is over one exact byte string."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def backoff(attempts: int, *, first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S) -> timedelta:
    """Wait before attempt `attempts + 1`: 2 s, 4 s, 8 s, … at most 10 minutes (the shared policy's curve)."""
    return RetryPolicy(first_s=first_s, max_s=max_s).backoff(attempts)


class WebhookError(Exception):
    """The receiver did not take the event (unreachable, timeout, non-2xx)."""


@dataclass
class Delivery:
    """The outcome of one tick's deliveries."""

    delivered: int = 0
    failed: int = 0
    given_up: int = 0


class ReleaseWebhook:
    """Delivers queued stage-change events, signed, in order, with backoff; tells the thread of a stuck one."""

    def __init__(
        self,
        *,
        url: str | None,
        secret: str | None,
        sessions: SessionFactory,
        clock: Callable[[], datetime],
        secrets: list[str],
        on_trouble: Callable[[Mapping[str, Any], str, bool], None] | None = None,
        transport: httpx.BaseTransport | None = None,
        items: BackgroundItems | None = None,
    ) -> None:
        self.url = url
        self.secret = secret
        self.sessions = sessions
        self.clock = clock
        self.secrets = secrets
        # Told (event payload, reason, given up?) on an event's first failure and when it is given up.
        self.on_trouble = on_trouble
        self._client = httpx.Client(timeout=TIMEOUT_S, transport=transport) if url else None
        # The backoff's longest wait (a test shortens it).
        self.max_retry_s = MAX_RETRY_S
        # The process's one isolation of background items (the release service passes the runs'); its own else.
        self.items = items or BackgroundItems(sessions=sessions, clock=clock, secrets=secrets)

    @property
    def enabled(self) -> bool:
        """Whether FINETUNE_RELEASE_WEBHOOK_URL is set (events are queued either way, for the record)."""
        return self._client is not None

    def post(self, payload: Mapping[str, Any]) -> None:
        """POST one event; WebhookError unless the receiver answers 2xx."""
        assert self._client is not None and self.url is not None
        body = encode(payload)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "finetune-bot-release-webhook/1",
            "X-Finetune-Event": EVENT_TYPE,
            "Idempotency-Key": str(payload["id"]),
        }
        if self.secret:
            # Signed at each attempt: a retry carries a fresh timestamp over the same body and Idempotency-Key.
            timestamp = str(int(self.clock().timestamp()))
            headers[TIMESTAMP_HEADER] = timestamp
            headers[SIGNATURE_HEADER] = sign(self.secret, timestamp, body)
        try:
            response = self._client.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise WebhookError(f"{type(exc).__name__}: {exc}") from exc
        if not 200 <= response.status_code < 300:
            raise WebhookError(f"HTTP {response.status_code}: {response.text[:200]}")

    def deliver_due(self) -> Delivery:
        """Send pending events oldest first, while each goes through; the head of the queue waits out its backoff
        and nothing behind it overtakes it (a receiver sees stage changes in the order they were made).

        An event that fails by itself (anything but the receiver's answer: an event that cannot be encoded, a bug)
        is isolated (bot.background): backed off, at last parked and told, and never holds the queue.
        """
        outcome = Delivery()
        if not self.enabled:
            return outcome
        now = self.clock()
        with self.sessions() as s:
            pending = list(repos.pending_release_events(s))
        batch = self.items.batch(WEBHOOK_EVENT, [str(event.id) for event in pending])
        for event in pending:
            key = str(event.id)
            if not batch.due(key):
                continue  # failing by itself: waiting out its own backoff, or parked
            if event.next_attempt_at > now:
                break
            tried = batch.attempt(key, partial(self._send, event, now, outcome), tell=partial(self._parked, event))
            if tried.error is not None:
                outcome.failed += 1
                continue
            if not tried.value:
                break
        return outcome

    def _send(self, event: ReleaseEvent, now: datetime, outcome: Delivery) -> bool:
        """POST one event and record the outcome; False when the receiver did not take it (retried in order)."""
        try:
            self.post(event.payload)
        except WebhookError as exc:
            reason = redact(str(exc), extra_secrets=self.secrets)
            attempts = event.attempts + 1
            given_up = attempts >= MAX_ATTEMPTS
            with self.sessions() as s:
                repos.update_release_event(
                    s,
                    event_id=event.id or 0,
                    attempts=attempts,
                    last_error=reason[:2000],
                    next_attempt_at=now + backoff(attempts, max_s=self.max_retry_s),
                    status="failed" if given_up else "pending",
                )
            log.warning("release webhook: event %s attempt %d failed: %s", event.event_id, attempts, reason)
            outcome.failed += 1
            outcome.given_up += given_up
            if (attempts == 1 or given_up) and self.on_trouble is not None:
                on_trouble = self.on_trouble
                # Telling is an item of its own: a thread that cannot be posted to never stops the deliveries.
                self.items.attempt(
                    WEBHOOK_TOLD, f"{event.id}:{attempts}", lambda: on_trouble(event.payload, reason, given_up)
                )
            return False
        with self.sessions() as s:
            repos.update_release_event(
                s,
                event_id=event.id or 0,
                status="delivered",
                delivered_at=self.clock(),
                attempts=event.attempts + 1,
            )
        outcome.delivered += 1
        return True

    def _parked(self, event: ReleaseEvent, error: str) -> None:
        """An event that kept failing by itself is given up: marked failed, and its version's thread told."""
        with self.sessions() as s:
            repos.update_release_event(s, event_id=event.id or 0, status="failed", last_error=error[:2000])
        if self.on_trouble is not None:
            self.on_trouble(event.payload, error, True)

    def close(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            self._client.close()
