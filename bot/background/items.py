"""The one way a background pass tries an item: isolated, recorded when it fails, backed off, parked, told.

A pass (the watcher tick's runs, pending cards, webhook events, holds, registrations, digests …) asks for a
`Batch` of its kind once, then hands each item to `Batch.attempt`: any exception the item raises is recorded
with it (attempts, error, when to try next) in `background_item_failures`, and the pass goes on with the next
item. A failing item is skipped until its backoff is over; at the policy's limit it is parked, and `tell` says
where it can (the requester, the item's thread). An item that goes through again is forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from bot.background.policy import ItemState, RetryPolicy, item_state
from bot.redact import redact
from storage import repos
from storage.db import SessionFactory
from storage.models import BackgroundItemFailure

log = logging.getLogger(__name__)

T = TypeVar("T")


class GiveUp(Exception):
    """Raised by an item that no retry can help (Slack says the person cannot be messaged): parked at once, and told."""


@dataclass
class Tried(Generic[T]):
    """What became of one item in one pass."""

    value: T | None = None
    error: str | None = None  # this attempt failed (recorded)
    state: ItemState = ItemState.DUE  # WAITING or PARKED: not tried at all in this pass

    @property
    def ok(self) -> bool:
        """The item was tried and went through."""
        return self.error is None and self.state is ItemState.DUE

    @property
    def skipped(self) -> bool:
        """Not tried in this pass: waiting out its backoff, or parked."""
        return self.state is not ItemState.DUE


class BackgroundItems:
    """Isolates the items of every background pass; one per process, shared by all passes."""

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        clock: Callable[[], datetime],
        policy: RetryPolicy | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        # Replaced by tests (and operators' tuning) as a whole: a frozen value, read at each failure.
        self.policy = policy or RetryPolicy()
        self.secrets = list(secrets)
        # Called before each item (serve sets `AckGate.between_items`): a pass that meets a burst of deliveries
        # lets their acks out item by item instead of holding the interpreter lock through the whole pass.
        self.pause: Callable[[], None] | None = None

    def batch(self, kind: str, keys: Sequence[str] | None = None) -> Batch:
        """The pass `kind`, with its failing items read in one query (only `keys`, when given)."""
        if keys is not None and not keys:
            # Most passes of an idle tick find no item: nothing to read (10 of an idle tick's 25 statements were
            # these reads, each `... IN ()`).
            return Batch(self, kind, {})
        with self.sessions() as s:
            rows = repos.item_failures(s, kind=kind, keys=keys)
        return Batch(self, kind, rows)

    def attempt(
        self,
        kind: str,
        key: str,
        fn: Callable[[], T],
        *,
        run_id: int | None = None,
        tell: Callable[[str], None] | None = None,
        parks: bool = True,
    ) -> Tried[T]:
        """One item on its own (a pass with a single item, or items found one at a time)."""
        return self.batch(kind, [key]).attempt(key, fn, run_id=run_id, tell=tell, parks=parks)

    def failures(self, *, kind: str | None = None, run_id: int | None = None) -> list[BackgroundItemFailure]:
        """The failing and parked items (of a pass, or of a run), oldest first."""
        with self.sessions() as s:
            return repos.list_item_failures(s, kind=kind, run_id=run_id)


class Batch:
    """One pass over the items of one kind."""

    def __init__(self, items: BackgroundItems, kind: str, rows: dict[str, BackgroundItemFailure]) -> None:
        self.items = items
        self.kind = kind
        self.rows = rows

    def state(self, key: str) -> ItemState:
        """Whether the pass tries this item now."""
        row = self.rows.get(key)
        if row is None:
            return ItemState.DUE
        return item_state(parked_at=row.parked_at, next_at=row.next_at, now=self.items.clock())

    def due(self, key: str) -> bool:
        """The pass tries this item now (never failed, or its backoff is over, and not parked)."""
        return self.state(key) is ItemState.DUE

    def attempt(
        self,
        key: str,
        fn: Callable[[], T],
        *,
        run_id: int | None = None,
        tell: Callable[[str], None] | None = None,
        parks: bool = True,
    ) -> Tried[T]:
        """Try the item unless it waits or is parked; a failure is recorded, never raised.

        `parks=False` for a whole sub-pass of a tick (the safety net around a pass whose items are not isolated one
        by one): recorded, tried again on the next tick without backoff, never given up.
        """
        state = self.state(key)
        if state is not ItemState.DUE:
            return Tried(state=state)
        if self.items.pause is not None:
            self.items.pause()
        try:
            value = fn()
        except Exception as exc:
            return Tried(error=self._failed(key, exc, run_id=run_id, tell=tell, parks=parks))
        if key in self.rows:
            with self.items.sessions() as s:
                repos.clear_item_failure(s, kind=self.kind, key=key)
            del self.rows[key]
            log.info("background: %s %s went through again", self.kind, key)
        return Tried(value=value)

    def _failed(
        self, key: str, exc: Exception, *, run_id: int | None, tell: Callable[[str], None] | None, parks: bool
    ) -> str:
        items = self.items
        error = redact(f"{type(exc).__name__}: {exc}", extra_secrets=items.secrets)
        previous = self.rows.get(key)
        attempts = (previous.attempts if previous is not None else 0) + 1
        now = items.clock()
        next_at, parked = items.policy.after_failure(attempts, now)
        parked = parked or isinstance(exc, GiveUp)
        if not parks:
            next_at, parked = now, False
        with items.sessions() as s:
            row = repos.record_item_failure(
                s,
                kind=self.kind,
                key=key,
                run_id=run_id,
                error=error,
                now=now,
                next_at=next_at,
                attempts=attempts,
                parked=parked,
            )
        self.rows[key] = row
        if not parked:
            log.warning(
                "background: %s %s failed (attempt %d of %d, next at %s): %s",
                self.kind,
                key,
                attempts,
                items.policy.limit,
                f"{next_at:%H:%M:%S}",
                error,
                exc_info=exc,
            )
            return error
        log.error("background: %s %s parked after %d failed attempt(s): %s", self.kind, key, attempts, error)
        if tell is not None:
            try:
                tell(error)
            except Exception:
                log.exception("background: telling that %s %s is parked failed too", self.kind, key)
            else:
                with items.sessions() as s:
                    repos.mark_item_told(s, item_id=row.id or 0, now=items.clock())
        return error
