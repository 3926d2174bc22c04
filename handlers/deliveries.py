"""The deliveries job: each process renews its lease, and carries out deliveries a dead process acked.

Every replica schedules it; a delivery is taken over by one conditional UPDATE, so exactly one replica
carries each orphan out, through the same deferred work a fresh delivery goes through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apscheduler.schedulers.base import BaseScheduler

from bot.scheduler import add_interval_job
from bot.services import Services
from handlers.actions import handle_button_delivery
from handlers.commands import handle_command_delivery
from handlers.reactions import handle_reaction_delivery

log = logging.getLogger(__name__)

WORK: dict[str, Callable[[Services, dict[str, Any]], None]] = {
    "command": handle_command_delivery,
    "action": handle_button_delivery,
    "event": handle_reaction_delivery,
}


def redo(services: Services, kind: str, body: dict[str, Any]) -> None:
    """Carry a recorded delivery out again, as if it had just been acked."""
    work = WORK.get(kind)
    if work is None:
        log.error("deliveries: no work for a %s delivery; marked done", kind)
        assert services.ledger is not None
        services.ledger.finish(body)
        return
    services.work.submit(body, lambda: work(services, body))


def tick(services: Services) -> int:
    """Renew this process's lease, then take over what dead processes left; how many were taken over."""
    ledger = services.ledger
    assert ledger is not None
    ledger.heartbeat()
    # Past Slack's retry window a delivery's key dedupes nothing: the table stays the size of a day's traffic.
    ledger.purge()
    return ledger.recover(lambda kind, body: redo(services, kind, body))


def register(scheduler: BaseScheduler, services: Services, *, interval_s: float) -> None:
    """Add the deliveries job to the volatile store (rebuilt at every start)."""
    add_interval_job(scheduler, lambda: tick(services), name="deliveries", interval_s=interval_s)
