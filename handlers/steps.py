"""`function_executed`: a Workflow Builder step of this app ran (`functions` in the app manifest).

Bolt's `app.function` acks it (auto-acknowledge) once the front door has recorded the delivery, so a retried
delivery never gets here; the work follows the ack, as every delivery's does, and a scheduled pass completes the
steps that wait (a promotion's approval) and tells Slack what a process that died had claimed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apscheduler.schedulers.base import BaseScheduler
from slack_bolt import App

from bot.scheduler import add_interval_job
from bot.services import Services
from bot.steps import STEP_CALLBACKS


def register(app: App, services: Services) -> None:
    """A Bolt function listener for every step the manifest declares."""
    for callback_id in STEP_CALLBACKS:
        app.function(callback_id)(_listener(services, callback_id))


def _listener(services: Services, callback_id: str) -> Callable[..., None]:
    def handle_step(body: dict[str, Any]) -> None:
        services.work.submit(body, lambda: handle_step_delivery(services, body))

    handle_step.__name__ = f"handle_{callback_id}"
    return handle_step


def handle_step_delivery(services: Services, body: dict[str, Any]) -> None:
    """Carry one execution out (after the ack, or again after a process died)."""
    if services.steps is not None:
        services.steps.execute(body)


def register_jobs(scheduler: BaseScheduler, services: Services, *, interval_s: float) -> None:
    """The steps' pass: every replica runs it (each completion is claimed once in the database)."""
    steps = services.steps
    if steps is None:
        return
    add_interval_job(
        scheduler, steps.tick, name="workflow_steps", interval_s=interval_s, first=services.acks.yield_to_acks
    )
