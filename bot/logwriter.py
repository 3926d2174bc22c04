"""`serve`'s log lines are written by a thread of their own, never by the thread that logs them.

A handler writes under its lock, and a write lets go of the interpreter lock: under a burst of deliveries the
request thread that held the handler's lock waited to get the interpreter back while every other request
thread waited for the handler (py-spy: `Handler.acquire` was the front door's second-largest wait). In
`python -m bench.ack`'s help bursts, `serve` acked at p50 1.22× / p99 1.23× the bare app with a line per
request written in place, 1.05× / 1.17× with the lines written here, and 0.96× / 0.95× with no line at all
(one interleaved run of 12 rounds). The standard library's `QueueHandler` takes each record in the caller
(its message formatted there, so arguments are read when they were logged) and its `QueueListener` writes
it to the handlers the process was configured with, in order.

What this costs: lines still in the queue when the process is killed with SIGKILL are lost (a stop with
SIGTERM or SIGINT writes them all first). They are what the last milliseconds logged; the deliveries
themselves are in the database before their ack either way.
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Iterator
from logging.handlers import QueueHandler, QueueListener


@contextlib.contextmanager
def logs_written_off_thread(logger: logging.Logger | None = None) -> Iterator[None]:
    """While inside: `logger`'s handlers (the root's by default) are fed by a queue and written by one thread.

    On exit every line logged so far is written, and the handlers are put back as they were.
    """
    target = logger if logger is not None else logging.getLogger()
    handlers = list(target.handlers)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    # Each handler keeps its own level, as it did when it was the logger's.
    listener = QueueListener(records, *handlers, respect_handler_level=True)
    front = QueueHandler(records)
    for handler in handlers:
        target.removeHandler(handler)
    target.addHandler(front)
    listener.start()
    try:
        yield
    finally:
        target.removeHandler(front)
        listener.stop()  # writes what is queued, then ends the thread
        for handler in handlers:
            target.addHandler(handler)
