"""Delivery keys and the exactly-once gate: a retried or duplicate delivery is acknowledged and does nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from bot.services import Services
from storage.repos import record_delivery


def command_key(body: Mapping[str, Any]) -> str:
    """Slash command: sha256 of team, user, channel, text and trigger_id (Slack sends no delivery id)."""
    parts = [str(body.get(k) or "") for k in ("team_id", "user_id", "channel_id", "text", "trigger_id")]
    return "command:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def event_key(body: Mapping[str, Any]) -> str:
    """Events API: the envelope's event_id (the same on every retry)."""
    return "event:" + str(body["event_id"])


def action_key(body: Mapping[str, Any]) -> str:
    """Interactivity: the payload's trigger_id, or the first action's action_ts when there is none."""
    trigger = body.get("trigger_id")
    if trigger:
        return "action:" + str(trigger)
    actions = body.get("actions") or [{}]
    return (
        "action:"
        + hashlib.sha256(f"{body.get('user', {}).get('id')}\x1f{actions[0].get('action_ts')}".encode()).hexdigest()
    )


def first_delivery(services: Services, *, key: str, kind: str) -> bool:
    """Record the delivery; True the first time, False (and counted) for a retry or duplicate."""
    with services.sessions() as session:
        new = record_delivery(session, key=key, kind=kind)
    if not new:
        services.metrics.duplicates.labels(kind=kind).inc()
    return new
