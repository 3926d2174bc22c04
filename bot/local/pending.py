"""How the local shell knows the bot has finished with what it was sent: its deferred work is quiet.

A listener acks, then hands its work to `Services.work`, which counts what is in flight; the reply comes
from that work. A script ends once every delivery it sent has been carried out and answered, without
waiting for runs, which the watcher follows on its own.
"""

from __future__ import annotations

import time

from bot.services import DeferredWork

# Bolt hands an event to its listener after answering it, so a delivery's work is submitted a moment after
# the shell's request returns: quiet means nothing in flight for this long since the last send or finish.
SETTLE_S = 0.5
DRAIN_TIMEOUT_S = 60.0


def drain(
    work: DeferredWork, *, sent_at: float, timeout_s: float = DRAIN_TIMEOUT_S, settle_s: float = SETTLE_S
) -> bool:
    """Wait until the bot is quiet: no ack pending, no work in flight, nothing new for `settle_s`; False on timeout.

    `sent_at` is `time.monotonic()` when the shell last sent a delivery.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        now = time.monotonic()
        if work.in_flight == 0 and work.gate.pending == 0 and now - max(work.changed_at, sent_at) >= settle_s:
            return True
        if now >= deadline:
            return False
        time.sleep(0.05)
