"""Reaction events (`reaction_added`, `reaction_removed`): the bot events the manifest subscribes to.

An event without a listener gets a 404 from Bolt, and Slack retries it (then disables the
subscription), so every bot event in `manifests/slack/app-manifest.yaml` needs a listener; a test checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import App

from bot.services import Services
from bot.slack.blocks import is_user_id

logger = logging.getLogger("finetune_bot.events")

SUBSCRIBED_EVENTS: tuple[str, ...] = ("reaction_added", "reaction_removed")


def _listener(services: Services, event_type: str) -> Callable[..., None]:
    def handle_event(body: dict[str, Any]) -> None:
        # Bolt acks events before listeners run; the work waits for pending acks on its own pool.
        services.work.submit(body, lambda: handle_reaction_delivery(services, body))

    handle_event.__name__ = f"handle_{event_type}"
    return handle_event


def handle_reaction_delivery(services: Services, body: dict[str, Any]) -> None:
    """After the ack (the front door admitted it once, so a retried event never gets here)."""
    event = body.get("event") or {}
    if not is_user_id(event.get("user")):
        # Slack's reactions always carry a U…/W… id: anything else is forged. Nobody to answer; never interpolated.
        logger.warning("event %s ignored: its user is not a Slack user id", event.get("type"))
        return
    logger.info("event %s event_id=%s user=%s", event.get("type"), body.get("event_id"), event.get("user"))
    if services.registry is None or event.get("type") not in SUBSCRIBED_EVENTS:
        return
    # Approval requests judge the reaction; a reaction on any other message is ignored there, silently.
    services.registry.on_reaction(event)


def register(app: App, services: Services) -> None:
    """Register a listener for every subscribed event."""
    for event_type in SUBSCRIBED_EVENTS:
        app.event(event_type)(_listener(services, event_type))
