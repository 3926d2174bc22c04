"""The deliveries job: each process renews its lease, and carries out deliveries a dead process acked.

Every replica schedules it; a delivery is taken over by one conditional UPDATE, so exactly one replica
carries each orphan out, through the same deferred work a fresh delivery goes through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from apscheduler.schedulers.base import BaseScheduler

from bot.background import BackgroundItems
from bot.forms import ACTION_PREFIX
from bot.home import NOTIFY_ACTION
from bot.scheduler import add_interval_job
from bot.services import Services
from handlers.actions import handle_button_delivery
from handlers.commands import handle_command_delivery
from handlers.forms import handle_form_action_delivery, handle_shortcut_delivery, handle_submission_delivery
from handlers.home import handle_home_delivery, handle_notify_delivery
from handlers.reactions import handle_reaction_delivery
from handlers.steps import handle_step_delivery
from storage.models import Delivery

log = logging.getLogger(__name__)

# The background pass that carries out a dead process's deliveries (bot.background): one item per delivery.
RECOVERY = "delivery_recovery"

WORK: dict[str, Callable[[Services, dict[str, Any]], None]] = {
    "command": handle_command_delivery,
    "action": handle_button_delivery,
    "event": handle_reaction_delivery,
}
# Interactivity and events other than a command button and a reaction, by payload or event type.
ACTION_WORK: dict[str, Callable[[Services, dict[str, Any]], None]] = {
    "view_submission": handle_submission_delivery,
    "message_action": handle_shortcut_delivery,
}
EVENT_WORK: dict[str, Callable[[Services, dict[str, Any]], None]] = {
    "app_home_opened": handle_home_delivery,
    "function_executed": handle_step_delivery,
}
# Actions other than run buttons and the form's, by action_id.
ACTION_ID_WORK: dict[str, Callable[[Services, dict[str, Any]], None]] = {NOTIFY_ACTION: handle_notify_delivery}


def work_for(kind: str, body: dict[str, Any]) -> Callable[[Services, dict[str, Any]], None] | None:
    """What carries a delivery of this kind out: by payload type for interactivity, by event type for events."""
    if kind == "action":
        if body.get("type") in ACTION_WORK:
            return ACTION_WORK[str(body["type"])]
        action_id = str(((body.get("actions") or [{}])[0] or {}).get("action_id") or "")
        if action_id.startswith(ACTION_PREFIX):
            return handle_form_action_delivery
        if action_id in ACTION_ID_WORK:
            return ACTION_ID_WORK[action_id]
    if kind == "event":
        event_type = str((body.get("event") or {}).get("type") or "")
        if event_type in EVENT_WORK:
            return EVENT_WORK[event_type]
    return WORK.get(kind)


def redo(services: Services, kind: str, body: dict[str, Any]) -> None:
    """Carry a recorded delivery out again, as if it had just been acked."""
    work = work_for(kind, body)
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
    items = (
        services.runs.deps.items
        if services.runs is not None
        else BackgroundItems(sessions=services.sessions, clock=services.clock)
    )
    orphans = [d for d in ledger.orphans() if d.payload is not None]
    batch = items.batch(RECOVERY, [d.key[:128] for d in orphans])
    done = 0
    for delivery in orphans:
        # Each orphan on its own (bot.background): one whose take-over keeps failing never keeps the others.
        tried = batch.attempt(delivery.key[:128], partial(take_over, services, delivery))
        done += bool(tried.value)
    return done


def take_over(services: Services, delivery: Delivery) -> bool:
    """Claim one orphan for this process and carry it out; False when another replica claimed it first."""
    assert services.ledger is not None and delivery.payload is not None
    if not services.ledger.take_over(delivery):
        return False
    log.warning("deliveries: carrying out %s %s, acked by a process that died", delivery.kind, delivery.key)
    redo(services, delivery.kind, dict(delivery.payload))
    return True


def register(scheduler: BaseScheduler, services: Services, *, interval_s: float) -> None:
    """Add the deliveries job to the volatile store (rebuilt at every start)."""
    add_interval_job(
        scheduler, lambda: tick(services), name="deliveries", interval_s=interval_s, first=services.acks.yield_to_acks
    )
