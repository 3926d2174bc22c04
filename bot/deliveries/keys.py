"""Delivery keys: what makes two Slack deliveries the same one (Slack resends a delivery it saw no ack for). Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any


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
    first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    user = body.get("user")
    user_id = user.get("id") if isinstance(user, dict) else None
    return "action:" + hashlib.sha256(f"{user_id}\x1f{first.get('action_ts')}".encode()).hexdigest()


def delivery_kind(body: Mapping[str, Any]) -> str:
    """command, event, action or other, from a parsed delivery body."""
    if "command" in body:
        return "command"
    if body.get("type") == "event_callback":
        return "event"
    if body.get("type") in ("block_actions", "view_submission", "view_closed", "shortcut", "message_action"):
        return "action"
    return "other"


def key_of(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, key) of a delivery the bot carries out, or None for one it does not track (url_verification…)."""
    kind = delivery_kind(body)
    if kind == "command":
        return kind, command_key(body)
    if kind == "event" and body.get("event_id"):
        return kind, event_key(body)
    if kind == "action":
        return kind, action_key(body)
    return None
