"""A person's side of views: what they enter, the payloads Slack sends the app for it, and Slack's handling of the
app's answer to a submission (`response_action`: errors, update, push, clear; an empty 200 closes the view).

The sender (`SlackSender`) and the local shell drive views through these; they hold the workspace lock.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

from bot.local.slack.state import APP_ID, TEAM_DOMAIN, ApiError, Workspace
from bot.local.slack.views import STATE_KEYS, views_push, views_update
from bot.local.slack.viewstate import StoredView


@dataclass
class Field:
    """One input of a view as a person sees it: label, kind, what it holds now, the choices and the hint."""

    block_id: str
    action_id: str
    label: str
    kind: str
    value: Any
    optional: bool
    choices: list[str] = field(default_factory=list)
    hint: str = ""
    error: str = ""
    dispatch: bool = False


def stored(ws: Workspace, view_id: str) -> StoredView:
    """An open view by id; ValueError when it is gone (closed, or never opened)."""
    view = ws.views.views.get(view_id)
    if view is None or view.closed:
        raise ValueError(f"view {view_id} is not open")
    return view


def fields(ws: Workspace, view_id: str) -> list[Field]:
    """The inputs of a view, in order, with their current values and the errors the app last answered."""
    view = stored(ws, view_id)
    values = view.data["state"]["values"]
    out = []
    for block in view.data["blocks"]:
        if block.get("type") != "input":
            continue
        element = block["element"]
        state = values[block["block_id"]][element["action_id"]]
        key = STATE_KEYS.get(element["type"], "value")
        current = state.get(key)
        if key == "selected_option":
            current = current["value"] if current else None
        elif key == "selected_options":
            current = [o["value"] for o in current or []]
        out.append(
            Field(
                block_id=block["block_id"],
                action_id=element["action_id"],
                label=block["label"]["text"],
                kind=element["type"],
                value=current,
                optional=bool(block.get("optional")),
                choices=[o["value"] for o in element.get("options") or []],
                hint=str((block.get("hint") or {}).get("text") or ""),
                error=view.errors.get(block["block_id"], ""),
                dispatch=bool(block.get("dispatch_action")),
            )
        )
    return out


def enter(ws: Workspace, view_id: str, block_id: str, value: str | list[str] | None) -> dict[str, Any]:
    """A person types into or picks in an input; its new state entry. ValueError for what Slack's client refuses."""
    view = stored(ws, view_id)
    block = next((b for b in view.data["blocks"] if b.get("block_id") == block_id and b["type"] == "input"), None)
    if block is None:
        raise ValueError(f"no input {block_id!r} in this view")
    element = block["element"]
    kind = element["type"]
    key = STATE_KEYS.get(kind, "value")
    entry: dict[str, Any] = {"type": kind}
    if key == "value":
        text = None if value in (None, "") else str(value)
        if text is not None and kind == "number_input":
            _check_number(element, text)
        entry["value"] = text
    elif key in ("selected_option", "selected_options"):
        wanted = [] if value in (None, "") else (value if isinstance(value, list) else [str(value)])
        options = {o["value"]: o for o in element.get("options") or []}
        unknown = [v for v in wanted if v not in options]
        if unknown:
            raise ValueError(f"{', '.join(unknown)} is not one of the choices: {', '.join(options)}")
        picked = [copy.deepcopy(options[v]) for v in wanted]
        entry[key] = picked if key == "selected_options" else (picked[0] if picked else None)
    elif key == "selected_conversation":
        if value and str(value) not in ws.channels:
            raise ValueError(f"no conversation {value}")
        entry[key] = value or None
    else:
        entry[key] = value
    view.data["state"]["values"][block_id] = {element["action_id"]: entry}
    return entry


def choose(ws: Workspace, view_id: str, block_id: str, action_id: str, value: str) -> dict[str, Any]:
    """A person picks an option of a select outside an input block (a section's accessory, an actions block): its
    new state entry, which the `block_actions` Slack sends at once carries. ValueError for an option not offered."""
    view = stored(ws, view_id)
    block = next((b for b in view.data["blocks"] if b.get("block_id") == block_id), None)
    if block is None:
        raise ValueError(f"no block {block_id!r} in this view")
    elements = [block.get("accessory"), *(block.get("elements") or [])]
    element = next((e for e in elements if isinstance(e, dict) and e.get("action_id") == action_id), None)
    if element is None or element.get("type") not in ("static_select", "radio_buttons"):
        raise ValueError(f"no select {action_id!r} in block {block_id!r}")
    options = {o["value"]: o for o in element.get("options") or []}
    if value not in options:
        raise ValueError(f"{value} is not one of the choices: {', '.join(options)}")
    entry = {"type": element["type"], "selected_option": copy.deepcopy(options[value])}
    view.data["state"]["values"].setdefault(block_id, {})[action_id] = entry
    return entry


def _check_number(element: dict[str, Any], text: str) -> None:
    """Slack's number input takes numbers only, whole ones unless decimals are allowed, within min and max."""
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not element.get("is_decimal_allowed") and not number.is_integer():
        raise ValueError(f"{text!r}: this field takes whole numbers")
    if element.get("min_value") is not None and number < float(element["min_value"]):
        raise ValueError(f"{text} is below the minimum {element['min_value']}")
    if element.get("max_value") is not None and number > float(element["max_value"]):
        raise ValueError(f"{text} is above the maximum {element['max_value']}")


def close(ws: Workspace, user: str) -> None:
    """The person closes the top modal (Cancel, or Back on a pushed view)."""
    stack = ws.views.stacks.get(user) or []
    if stack:
        ws.views.views[stack.pop()].closed = True


def answer_submission(ws: Workspace, view_id: str, status: int, body: str) -> dict[str, Any]:
    """What Slack does with the app's answer to a `view_submission`; a summary {"action", "errors"}."""
    view = stored(ws, view_id)
    view.errors = {}
    if status != 200:
        return {"action": "failed", "detail": f"HTTP {status}: Slack shows 'We had some trouble connecting'"}
    if not body.strip():
        close(ws, view.user)
        return {"action": "closed"}
    try:
        answer = json.loads(body)
    except ValueError:
        return {"action": "failed", "detail": "not JSON: Slack shows 'We had some trouble connecting'"}
    action = answer.get("response_action")
    if action == "errors":
        errors = answer.get("errors") or {}
        inputs = {b["block_id"] for b in view.data["blocks"] if b.get("type") == "input"}
        strays = sorted(set(errors) - inputs)
        if not errors or strays or not all(isinstance(v, str) and v for v in errors.values()):
            return {"action": "failed", "detail": f"errors must name input blocks with a message; not {strays}"}
        view.errors = dict(errors)
        return {"action": "errors", "errors": dict(errors)}
    try:
        if action == "update":
            views_update(ws, {"view_id": view_id, "view": answer.get("view")})
            return {"action": "update"}
        if action == "push":
            views_push(ws, {"trigger_id": ws.views.mint_trigger(view.user), "view": answer.get("view")})
            return {"action": "push"}
    except ApiError as err:
        return {"action": "failed", "detail": f"{err.error}: {err.extra}"}
    if action == "clear":
        while ws.views.stacks.get(view.user):
            close(ws, view.user)
        return {"action": "clear"}
    return {"action": "failed", "detail": f"unknown response_action {action!r}"}


# --- payloads Slack sends the app -----------------------------------------------------------------


def _base(ws: Workspace, kind: str, user: str) -> dict[str, Any]:
    return {
        "type": kind,
        "team": {"id": ws.team_id, "domain": TEAM_DOMAIN},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": ws.team_id},
        "api_app_id": APP_ID,
        "token": "standin-verification-token",
        "trigger_id": ws.views.mint_trigger(user),
        "is_enterprise_install": False,
        "enterprise": None,
    }


def submission_payload(ws: Workspace, view_id: str) -> dict[str, Any]:
    """A `view_submission` of an open view, with its state as entered."""
    view = stored(ws, view_id)
    return {**_base(ws, "view_submission", view.user), "view": copy.deepcopy(view.data), "response_urls": []}


def view_action_payload(ws: Workspace, view_id: str, block_id: str, action_id: str) -> dict[str, Any]:
    """A `block_actions` from a view: a button clicked, or an input with `dispatch_action` changed."""
    view = stored(ws, view_id)
    block = next((b for b in view.data["blocks"] if b.get("block_id") == block_id), None)
    if block is None:
        raise ValueError(f"no block {block_id!r} in this view")
    elements = [block.get("element"), block.get("accessory"), *(block.get("elements") or [])]
    element = next((e for e in elements if isinstance(e, dict) and e.get("action_id") == action_id), None)
    if element is None:
        raise ValueError(f"no element {action_id!r} in block {block_id!r}")
    now = f"{time.time():.6f}"
    action: dict[str, Any] = {"action_id": action_id, "block_id": block_id, "type": element["type"], "action_ts": now}
    if element["type"] == "button":
        action["text"] = element.get("text")
        if element.get("value") is not None:
            action["value"] = element["value"]
    else:
        state = view.data["state"]["values"].get(block_id, {}).get(action_id) or {}
        action.update({k: v for k, v in state.items() if k != "type"})
    container = {"type": "view", "view_id": view_id}
    return {
        **_base(ws, "block_actions", view.user),
        "container": container,
        "view": copy.deepcopy(view.data),
        "actions": [action],
        "state": copy.deepcopy(view.data["state"]),
    }


def shortcut_payload(
    ws: Workspace, callback_id: str, *, user: str, channel: str, message_ts: str, response_url: str
) -> dict[str, Any]:
    """A message shortcut (`message_action`) on a message of a channel."""
    message = copy.deepcopy(ws.channel(channel).find(message_ts))
    return {
        **_base(ws, "message_action", user),
        "callback_id": callback_id,
        "action_ts": f"{time.time():.6f}",
        "message_ts": message_ts,
        "message": message,
        "channel": {"id": channel, "name": ws.channel(channel).name},
        "response_url": response_url,
    }


def home_opened_event(ws: Workspace, user: str) -> dict[str, Any]:
    """`app_home_opened` for the Home tab, with the view shown there now (if any)."""
    if user not in ws.users:
        raise ApiError("user_not_found")
    event: dict[str, Any] = {"type": "app_home_opened", "user": user, "channel": "D" + user[1:], "tab": "home"}
    view_id = ws.views.homes.get(user)
    if view_id is not None:
        event["view"] = copy.deepcopy(ws.views.views[view_id].data)
    return event


class PersonViews:
    """The people's side of views on the stand-in: what they see in modals and the Home tab, what they enter."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def mint_trigger(self, user: str) -> str:
        """A trigger id for an interaction of `user` (good once, for 3 s), as Slack sends with each one."""
        with self.ws.lock:
            return self.ws.views.mint_trigger(user)

    def open_views(self, user: str) -> list[dict[str, Any]]:
        """The user's open modals, root first."""
        with self.ws.lock:
            return [copy.deepcopy(self.ws.views.views[v].data) for v in self.ws.views.stack(user)]

    def top(self, user: str) -> dict[str, Any] | None:
        """The modal the user sees now, if any."""
        opened = self.open_views(user)
        return opened[-1] if opened else None

    def home(self, user: str) -> dict[str, Any] | None:
        """The user's Home tab as last published."""
        with self.ws.lock:
            view_id = self.ws.views.homes.get(user)
            return copy.deepcopy(self.ws.views.views[view_id].data) if view_id else None

    def fields(self, view_id: str) -> list[Field]:
        """The inputs of an open view with what they hold and the errors the app answered."""
        with self.ws.lock:
            return fields(self.ws, view_id)

    def enter(self, view_id: str, block_id: str, value: str | list[str] | None) -> dict[str, Any]:
        """A person types into or picks in an input of an open view (ValueError for what Slack refuses)."""
        with self.ws.lock:
            return enter(self.ws, view_id, block_id, value)

    def choose(self, view_id: str, block_id: str, action_id: str, value: str) -> dict[str, Any]:
        """A person picks an option of a select in a section or actions block (then `SlackSender.view_action`)."""
        with self.ws.lock:
            return choose(self.ws, view_id, block_id, action_id, value)

    def close(self, user: str) -> None:
        """The person closes their top modal."""
        with self.ws.lock:
            close(self.ws, user)

    def set_home_enabled(self, enabled: bool) -> None:
        """Whether the app's Home tab is on (views.publish answers `not_enabled` when it is off)."""
        with self.ws.lock:
            self.ws.views.home_enabled = enabled
