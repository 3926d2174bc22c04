"""The types of the fields Bolt and the listeners index without checking, at any depth of a payload. Pure.

Bolt reads `body["event"]["type"]`, `"id" in body["user"]`, `body["authorizations"][0].get(…)` and the
like as Slack documents them; a signed body where one of them has another type made it raise (a 500 and
an error reply). Slack's own payloads always have these shapes, so checking them refuses nothing real.
"""

from __future__ import annotations

from typing import Any

from bot.frontdoor.verdict import malformed

MAX_DEPTH = 32  # Slack's deepest payloads (views of blocks of elements) nest about ten levels

# A string, null, or an object whose `id` is a string (Bolt: `if isinstance(x, str) … elif "id" in x`).
ID_FIELDS = frozenset({"user", "team", "channel", "enterprise"})
# Objects, never null: Bolt reads them with `body.get("event", {}).get(…)` and `"callback_id" in body["view"]`.
OBJECT_FIELDS = frozenset(
    {
        "event",
        "item",
        "message",
        "previous_message",
        "assistant_thread",
        "view",
        "container",
        "state",
        "function_data",
        "function",  # a step's `function_executed`: Bolt reads `event.function.callback_id`
        "workflow_step",
    }
)
# Lists of objects: Bolt takes `[0]` of them and calls `.get` on it.
OBJECT_LIST_FIELDS = frozenset({"authorizations", "actions", "response_urls"})
# Strings or null wherever they appear.
STRING_FIELDS = frozenset(
    {
        "type",
        "subtype",
        "event_id",
        "team_id",
        "user_id",
        "channel_id",
        "enterprise_id",
        "api_app_id",
        "thread_ts",
        "ts",
        "event_ts",
        "message_ts",
        "action_ts",
        "response_url",
        "trigger_id",
        "action_id",
        "block_id",
        "callback_id",
        "command",
        "reaction",
        "channel_type",
        "tab",
        "bot_id",
        "user_team",
        "item_user",
        "function_execution_id",
        "bot_access_token",
        "challenge",
        "token",
    }
)


def check_shapes(value: Any, depth: int = 0) -> None:
    """Raise Refused (400) when a field named above has another type, or the payload nests past MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise malformed(f"payload nested deeper than {MAX_DEPTH}")
    if isinstance(value, list):
        for item in value:
            check_shapes(item, depth + 1)
        return
    if not isinstance(value, dict):
        return
    for name, field in value.items():
        if name in ID_FIELDS:
            _check_id(name, field)
        elif name in OBJECT_FIELDS and not isinstance(field, dict):
            raise malformed(f"{name} not an object")
        elif name in OBJECT_LIST_FIELDS and not (
            isinstance(field, list) and all(isinstance(item, dict) for item in field)
        ):
            raise malformed(f"{name} not a list of objects")
        elif name in STRING_FIELDS and field is not None and not isinstance(field, str):
            raise malformed(f"{name} not a string")
        check_shapes(field, depth + 1)


def _check_id(name: str, field: Any) -> None:
    if field is None or isinstance(field, str):
        return
    if isinstance(field, dict) and (field.get("id") is None or isinstance(field.get("id"), str)):
        return
    raise malformed(f"{name} not an id or an object with one")
