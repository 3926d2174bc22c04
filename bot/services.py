"""The long-lived collaborators every handler receives (the seam between Slack listeners and the rest)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.deliveries import DeliveryLedger
from bot.lease import holder_id
from bot.metrics import BotMetrics
from bot.slack.channels import ChannelMembers
from bot.slack.places import PostablePlaces
from storage.db import SessionFactory

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from bot.catalog import Catalog
    from bot.digest import DigestRuntime
    from bot.evals import EvalService
    from bot.follow import LogFollower
    from bot.forms import RunForm
    from bot.home import AppHome
    from bot.outputs import OutputsService
    from bot.preflight import PreflightService
    from bot.registry import RegistrationService
    from bot.release import ReleaseService
    from bot.reload import CatalogReloader
    from bot.runs import RunService
    from bot.steps import StepService
    from bot.sweeps import SweepService
    from bot.usage import UsageService

# Work waits at most this long for pending acks, so a steady stream of deliveries cannot starve it.
MAX_YIELD_S = 0.25
# A background pass waits at most this long per item for pending acks: a pass meeting a steady stream of
# deliveries slows down, it never stops.
ITEM_YIELD_S = 0.05
# A burst is over when no delivery has been pending for this long (arrivals have gaps of a few ms).
SETTLE_S = 0.02
# Work after an ack mostly waits on Slack, Polyaxon or the database: threads, not cores.
WORK_THREADS = 32
# How long a process's deliveries stay its own after its last heartbeat (a killed process's pass on after this).
DELIVERY_LEASE_S = 30.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


class AckGate:
    """Counts deliveries still waiting for their ack, so work that follows an ack can let them go first.

    Python threads share one interpreter lock: work running while a burst is being acked slows every
    ack behind it. The front door (HTTP or Socket Mode) brackets each delivery with `enter`/`leave`;
    a listener calls `yield_to_acks()` after `ack()` and before its work.
    """

    def __init__(self, max_yield_s: float = MAX_YIELD_S, settle_s: float = SETTLE_S) -> None:
        self.max_yield_s = max_yield_s
        self.settle_s = settle_s
        self._pending = 0
        self._idle_since = time.monotonic()
        self._idle = threading.Condition()

    def enter(self) -> None:
        """A delivery arrived."""
        with self._idle:
            self._pending += 1

    def leave(self) -> None:
        """A delivery was answered."""
        with self._idle:
            self._pending -= 1
            if self._pending <= 0:
                self._pending = 0
                self._idle_since = time.monotonic()
                self._idle.notify_all()

    @property
    def pending(self) -> int:
        """Deliveries not yet answered."""
        with self._idle:
            return self._pending

    def yield_to_acks(self, until: float | None = None) -> None:
        """Wait until no delivery has been waiting for its ack for `settle_s`, at most until `until`
        (`time.monotonic()`; default `max_yield_s` from now)."""
        deadline = until if until is not None else time.monotonic() + self.max_yield_s
        with self._idle:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return
                if self._pending == 0:
                    quiet_for = now - self._idle_since
                    if quiet_for >= self.settle_s:
                        return
                    self._idle.wait(timeout=min(self.settle_s - quiet_for, deadline - now))
                else:
                    self._idle.wait(timeout=deadline - now)

    def between_items(self) -> None:
        """A background pass's yield before each item: as `yield_to_acks`, for at most ITEM_YIELD_S."""
        self.yield_to_acks(until=time.monotonic() + ITEM_YIELD_S)


ErrorReporter = Callable[[Exception, dict[str, Any]], None]


class DeferredWork:
    """Runs what a listener does after `ack()`, on a pool of its own, once pending acks have gone out.

    Bolt's listener then only acks, so slow work (Slack, Polyaxon, the database) never holds up an ack.
    One gatekeeper thread waits on the `AckGate` and hands work to the pool once the acks are out (or the
    work has waited `max_yield_s`): when every pool thread waited on the gate itself, each ack that emptied
    it woke them all, and that herd cost more interpreter time per delivery than the ack itself.
    `build_app` sets `on_error` to the app's one error handler.
    """

    def __init__(self, gate: AckGate, threads: int = WORK_THREADS, on_error: ErrorReporter | None = None) -> None:
        self.gate = gate
        self.on_error: ErrorReporter | None = on_error
        # Called with the delivery's body once its work is over, answered or failed (the ledger marks it done).
        self.on_done: Callable[[dict[str, Any]], None] | None = None
        # Threads start lazily, on the first submit: constructing this has no side effects.
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="slack-work")
        self._waiting: queue.SimpleQueue[_Deferred | None] = queue.SimpleQueue()
        self._gatekeeper: threading.Thread | None = None
        self._shut = False
        self._lock = threading.Lock()
        self._in_flight: set[Future[None]] = set()
        self._changed_at = time.monotonic()

    def submit(self, body: dict[str, Any], work: Callable[[], None]) -> Future[None]:
        """Run `work()` soon; an exception goes to `on_error` with the delivery's body."""
        future: Future[None] = Future()
        with self._lock:
            if self._shut:  # as the pool itself refuses: nothing would ever run it
                raise RuntimeError("cannot schedule new work after shutdown")
            self._in_flight.add(future)
            self._changed_at = time.monotonic()
            if self._gatekeeper is None:
                self._gatekeeper = threading.Thread(target=self._admit_loop, name="slack-work-gate", daemon=True)
                self._gatekeeper.start()
        future.add_done_callback(self._done)
        self._waiting.put(_Deferred(body, work, future, time.monotonic() + self.gate.max_yield_s))
        return future

    def _admit_loop(self) -> None:
        while (item := self._waiting.get()) is not None:
            self.gate.yield_to_acks(until=item.deadline)
            try:
                self._pool.submit(self._run, item)
            except RuntimeError:  # the pool was shut down without waiting: the work is dropped with it
                item.future.cancel()

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._in_flight.discard(future)
            self._changed_at = time.monotonic()

    @property
    def in_flight(self) -> int:
        """Deliveries whose work is queued or running."""
        with self._lock:
            return len(self._in_flight)

    @property
    def changed_at(self) -> float:
        """`time.monotonic()` of the last submit or finish (how long the work has been quiet)."""
        with self._lock:
            return self._changed_at

    def _run(self, item: _Deferred) -> None:
        if not item.future.set_running_or_notify_cancel():
            return
        try:
            try:
                item.work()
            except Exception as exc:
                if self.on_error is None:
                    raise
                self.on_error(exc, item.body)
            finally:
                if self.on_done is not None:
                    self.on_done(item.body)
        except BaseException as exc:  # the future always ends: `in_flight` (and the shell's drain) count on it
            item.future.set_exception(exc)
        else:
            item.future.set_result(None)

    def nothing_more(self, body: dict[str, Any]) -> None:
        """A delivery answered in its ack (a refused form submission): done now, with no work to follow."""
        if self.on_done is not None:
            self.on_done(body)

    def shutdown(self, wait: bool = True) -> None:
        """Finish queued work (when `wait`) and stop the threads."""
        with self._lock:
            gatekeeper, already = self._gatekeeper, self._shut
            self._shut = True
        if gatekeeper is not None and not already:
            self._waiting.put(None)
            if wait:
                gatekeeper.join()
        self._pool.shutdown(wait=wait)


@dataclass
class _Deferred:
    body: dict[str, Any]
    work: Callable[[], None]
    future: Future[None]
    deadline: float  # `time.monotonic()` past which it runs even while acks are pending


@dataclass
class Services:
    """Built once by the CLI (or a test) and passed to `build_app` and every `register(app, services)`."""

    sessions: SessionFactory
    catalog: Catalog | None = None
    # Takes changes of the catalog folder while the bot runs (bot.reload).
    reloader: CatalogReloader | None = None
    gateway: Any | None = None  # bot.polyaxon.PolyaxonGateway
    # Run lifecycle and digests need Polyaxon / a scheduler; a bot built without them answers that they are off.
    runs: RunService | None = None
    digests: DigestRuntime | None = None
    # Approval-gated registration needs Polyaxon too (built with `runs`), as do output read-back and preflights.
    registry: RegistrationService | None = None
    outputs: OutputsService | None = None
    evals: EvalService | None = None
    preflights: PreflightService | None = None
    sweeps: SweepService | None = None
    release: ReleaseService | None = None
    # Accelerator-hours: estimates, accounting, `usage` and `budget` (needs Polyaxon, built with `runs`).
    usage: UsageService | None = None
    # `logs RUN follow`: the log streamed into the run's thread on threads of its own (needs Polyaxon).
    follows: LogFollower | None = None
    # Slack-native surfaces: the run form (a modal) and App Home; `build_app` builds them on the app's client.
    forms: RunForm | None = None
    home: AppHome | None = None
    # Workflow Builder steps (`function_executed`); built by `build_app` on the app's client.
    steps: StepService | None = None
    # The Bolt app's Web API client (set by `build_app`), for answers that are not tied to one capability.
    slack: WebClient | None = None
    metrics: BotMetrics = field(default_factory=BotMetrics)
    # Whether the bot can post where a command was typed (cached briefly per channel).
    places: PostablePlaces = field(default_factory=PostablePlaces)
    # Who is in a channel (`conversations.members`; a yes cached briefly): the form's and App Home's one reader.
    members: ChannelMembers = field(default_factory=ChannelMembers)
    clock: Callable[[], datetime] = _utcnow
    acks: AckGate = field(default_factory=AckGate)
    # Deliveries recorded before their ack and finished after their work (built with defaults if not given).
    ledger: DeliveryLedger | None = None
    work: DeferredWork = field(init=False)

    def __post_init__(self) -> None:
        self.work = DeferredWork(self.acks)
        if self.ledger is None:
            self.ledger = DeliveryLedger(
                sessions=self.sessions, clock=self.clock, holder=holder_id(), ttl=timedelta(seconds=DELIVERY_LEASE_S)
            )
        self.work.on_done = self.ledger.finish
