"""Writes to the Polyaxon API from inside the job, retried: a write that is retried and lands is not an error in
the run's log.

Polyaxon's client logs every failed call itself, at ERROR on its `polyaxon.cli` logger, before it raises
(`polyaxon/_client/decorators/client_call_handler.py` → `polyaxon/exceptions.py` `handle_api_error`): a spurious
405 or a 503 while the API server restarts would put `ERROR … Status: 405` in a healthy run's log. Those lines are
held back while a write is tried, and shown, with one warning of our own, only when its last try failed too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

CLIENT_LOGGER = "polyaxon.cli"
# Answers a later try may not get again: the server busy or restarting, a write that overlapped another.
TRANSIENT = frozenset({405, 409, 429, 500, 502, 503, 504})
ATTEMPTS = 4
BACKOFF_S = 0.25


class HeldBack(logging.Filter):
    """Holds the client's own log records on this thread while a write is being tried."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        held: list[logging.LogRecord] | None = getattr(self._local, "records", None)
        if held is None:
            return True
        held.append(record)
        return False

    @contextlib.contextmanager
    def holding(self) -> Iterator[list[logging.LogRecord]]:
        """Records logged on this thread inside the block are kept in the list instead of being logged."""
        held: list[logging.LogRecord] = []
        self._local.records = held
        try:
            yield held
        finally:
            self._local.records = None


_held_back = HeldBack()
_installed = threading.Lock()


def held_back() -> HeldBack:
    """The one filter on Polyaxon's client logger (installed once per process)."""
    with _installed:
        client = logging.getLogger(CLIENT_LOGGER)
        if _held_back not in client.filters:
            client.addFilter(_held_back)
    return _held_back


def transient(exc: BaseException) -> bool:
    """Whether another try may land: an HTTP answer in TRANSIENT, or no answer at all (a connection error)."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        return status in TRANSIENT
    return isinstance(exc, OSError) or type(exc).__module__.startswith("urllib3")


def write(
    call: Callable[[], Any],
    what: str,
    log: logging.Logger,
    *,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Try `call` up to `attempts` times while its failures are transient; whether it landed. The client's lines
    of a try that a later one made good are dropped; those of the last failed try are logged, then one warning."""
    filter_ = held_back()
    client = logging.getLogger(CLIENT_LOGGER)
    held: list[logging.LogRecord]
    error: BaseException | None = None
    tries = 0
    for tries in range(1, attempts + 1):
        with filter_.holding() as held:
            try:
                call()
                return True
            except Exception as exc:  # tracking must never fail the training run
                error = exc
        if not transient(error) or tries == attempts:
            break
        sleep(BACKOFF_S * 2 ** (tries - 1))
    for record in held:
        client.handle(record)
    log.warning("polyaxon %s failed after %d tr%s: %s", what, tries, "y" if tries == 1 else "ies", error)
    return False
