"""The `views.*` family (open, push, update, publish) and what a person does to a view (type, pick, close).

Views are checked the way Slack checks them: `slack_sdk.models.views.View` carries Slack's own limits (title and
button lengths, 100 blocks, private_metadata and callback_id lengths), and `check_view` adds what the Web API
refuses besides (an input without a label or element, repeated block ids, a modal with inputs but no submit,
select options over their limits, a view over 250 kB). Errors come back as Slack's: `invalid_arguments` with
`response_metadata.messages`, `invalid_trigger_id`, `expired_trigger_id`, `exchanged_trigger_id`,
`push_limit_reached`, `hash_conflict`, `not_found`, `view_too_large`, `not_enabled`.
"""

from __future__ import annotations

import copy
import json
import secrets
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.views import View

from bot.local.slack.limits import block_errors
from bot.local.slack.state import APP_ID, BOT_ID, ApiError, ApiMethod, Workspace, maybe_json
from bot.local.slack.viewstate import MAX_STACK, TRIGGER_TTL_S, StoredView, new_hash, new_view_id

MAX_VIEW_BYTES = 250_000
MAX_VIEW_BLOCKS = 100
MAX_OPTIONS = 100
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_LABEL = 2_000
MAX_BLOCK_ID = 255
INPUT_ELEMENTS = frozenset(
    {
        "plain_text_input",
        "number_input",
        "static_select",
        "multi_static_select",
        "conversations_select",
        "channels_select",
        "users_select",
        "checkboxes",
        "radio_buttons",
        "datepicker",
        "email_text_input",
        "url_text_input",
    }
)
# How each input element reports its value in `view.state.values` (the key besides `type`).
STATE_KEYS = {
    "static_select": "selected_option",
    "radio_buttons": "selected_option",
    "multi_static_select": "selected_options",
    "checkboxes": "selected_options",
    "conversations_select": "selected_conversation",
    "channels_select": "selected_channel",
    "users_select": "selected_user",
    "datepicker": "selected_date",
}
INITIAL_KEYS = {
    "selected_option": "initial_option",
    "selected_options": "initial_options",
    "selected_conversation": "initial_conversation",
    "selected_channel": "initial_channel",
    "selected_user": "initial_user",
    "selected_date": "initial_date",
    "value": "initial_value",
}


def invalid(*messages: str) -> ApiError:
    """Slack's `invalid_arguments`, with its messages."""
    return ApiError("invalid_arguments", response_metadata={"messages": [f"[ERROR] {m}" for m in messages]})


def check_view(view: Any, *, kind: str | None) -> dict[str, Any]:
    """The view as a dict, or the error Slack answers for it; `kind` is the type the method requires."""
    view = maybe_json(view)
    if not isinstance(view, dict):
        raise invalid("missing required field: view")
    if len(json.dumps(view).encode()) > MAX_VIEW_BYTES:
        raise ApiError("view_too_large")
    if kind is not None and view.get("type") != kind:
        raise invalid(f"view type must be {kind} [json-pointer:/view/type]")
    try:
        View(**view).to_dict()  # slack_sdk's models carry Slack's limits; to_dict validates every nested object
    except (SlackObjectFormationError, TypeError, AttributeError) as exc:
        raise invalid(f"{exc} [json-pointer:/view]") from None
    blocks = view.get("blocks") or []
    problems = block_errors(blocks, max_blocks=MAX_VIEW_BLOCKS, where="/view/blocks")
    problems += _input_errors(blocks)
    if view["type"] == "modal":
        if not view.get("title"):
            problems.append("modal views need a title [json-pointer:/view/title]")
        if any(b.get("type") == "input" for b in blocks if isinstance(b, dict)) and not view.get("submit"):
            problems.append("a view with input blocks needs a submit button [json-pointer:/view/submit]")
    if problems:
        raise invalid(*problems)
    return view


def _input_errors(blocks: list[Any]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        where = f"[json-pointer:/view/blocks/{i}]"
        block_id = block.get("block_id")
        if block_id is not None:
            if block_id in seen:
                problems.append(f"duplicate block_id {block_id!r} {where}")
            seen.add(block_id)
            if len(str(block_id)) > MAX_BLOCK_ID:
                problems.append(f"block_id must be less than {MAX_BLOCK_ID + 1} characters {where}")
        if block.get("type") in ("section", "actions"):
            # Selects outside input blocks follow the same option rules (a section's accessory, an actions block).
            for j, element in enumerate([block.get("accessory"), *(block.get("elements") or [])]):
                if isinstance(element, dict) and element.get("type") in ("static_select", "radio_buttons"):
                    problems += _option_errors(element, f"{where}/{'accessory' if j == 0 else f'elements/{j - 1}'}")
        if block.get("type") != "input":
            continue
        label = block.get("label") or {}
        if not isinstance(label, dict) or not label.get("text") or len(str(label.get("text"))) > MAX_LABEL:
            problems.append(f"input blocks need a label of 1 to {MAX_LABEL} characters {where}/label")
        element = block.get("element")
        if not isinstance(element, dict) or element.get("type") not in INPUT_ELEMENTS:
            problems.append(f"input blocks need an input element {where}/element")
            continue
        problems += _option_errors(element, f"{where}/element")
    return problems


def _option_errors(element: dict[str, Any], where: str) -> list[str]:
    options = element.get("options")
    if options is None:
        return []
    problems: list[str] = []
    if not isinstance(options, list) or not 0 < len(options) <= MAX_OPTIONS:
        return [f"must provide 1 to {MAX_OPTIONS} options {where}/options"]
    values = []
    for j, option in enumerate(options):
        text = str(((option or {}).get("text") or {}).get("text") or "")
        value = str((option or {}).get("value") or "")
        if not text or len(text) > MAX_OPTION_TEXT:
            problems.append(f"option text must be 1 to {MAX_OPTION_TEXT} characters {where}/options/{j}")
        if not value or len(value) > MAX_OPTION_VALUE:
            problems.append(f"option value must be 1 to {MAX_OPTION_VALUE} characters {where}/options/{j}")
        values.append(value)
    initial = element.get("initial_options") or ([element["initial_option"]] if element.get("initial_option") else [])
    problems += [
        f"initial option {o.get('value')!r} is not one of the options {where}"
        for o in initial
        if isinstance(o, dict) and o.get("value") not in values
    ]
    return problems


def _take_trigger(ws: Workspace, args: dict[str, Any]) -> str:
    trigger_id = args.get("trigger_id")
    if not trigger_id:
        raise invalid("missing required field: trigger_id")
    trigger = ws.views.triggers.get(str(trigger_id))
    if trigger is None:
        raise ApiError("invalid_trigger_id")
    if trigger.used:
        raise ApiError("exchanged_trigger_id")
    if ws.views.clock() - trigger.issued_at > TRIGGER_TTL_S:
        raise ApiError("expired_trigger_id")
    trigger.used = True
    return trigger.user


def initial_state(blocks: list[dict[str, Any]], before: dict[str, Any] | None = None) -> dict[str, Any]:
    """`state.values` of a new view: what each input was given (`initial_*`), or what the person had entered in an
    input of the same block_id and action_id before an update (Slack keeps it: a new block_id resets a field)."""
    values: dict[str, Any] = {}
    for block in blocks:
        if block.get("type") != "input":
            continue
        element = block["element"]
        block_id, action_id = block["block_id"], element["action_id"]
        kept = ((before or {}).get(block_id) or {}).get(action_id)
        if kept is not None and kept.get("type") == element["type"]:
            values[block_id] = {action_id: kept}
            continue
        key = STATE_KEYS.get(element["type"], "value")
        initial = element.get(INITIAL_KEYS[key])
        if key == "selected_options":
            initial = initial or []
        values[block_id] = {action_id: {"type": element["type"], key: copy.deepcopy(initial)}}
    return values


def _with_ids(view: dict[str, Any]) -> dict[str, Any]:
    """Slack gives every block a block_id and every element an action_id when the app gave none."""
    view = copy.deepcopy(view)
    for block in view.get("blocks") or []:
        block.setdefault("block_id", secrets.token_hex(3))
        for element in [block.get("element"), block.get("accessory"), *(block.get("elements") or [])]:
            if isinstance(element, dict) and element.get("type") in INPUT_ELEMENTS | {"button", "overflow"}:
                element.setdefault("action_id", secrets.token_hex(3))
    return view


def _store(ws: Workspace, user: str, view: dict[str, Any], *, view_id: str | None = None, **ids: Any) -> StoredView:
    view = _with_ids(view)
    old = ws.views.views.get(view_id) if view_id else None
    before = old.data["state"]["values"] if old is not None else None
    view_id = view_id or new_view_id()
    data = {
        "id": view_id,
        "team_id": ws.team_id,
        "type": view["type"],
        "title": view.get("title"),
        "submit": view.get("submit"),
        "close": view.get("close"),
        "blocks": view.get("blocks") or [],
        "private_metadata": view.get("private_metadata") or "",
        "callback_id": view.get("callback_id") or "",
        "external_id": view.get("external_id") or "",
        "state": {"values": initial_state(view.get("blocks") or [], before)},
        "hash": new_hash(),
        "clear_on_close": bool(view.get("clear_on_close")),
        "notify_on_close": bool(view.get("notify_on_close")),
        "root_view_id": ids.get("root_view_id", view_id),
        "previous_view_id": ids.get("previous_view_id"),
        "app_id": APP_ID,
        "app_installed_team_id": ws.team_id,
        "bot_id": BOT_ID,
    }
    stored = StoredView(user=user, data=data)
    ws.views.views[view_id] = stored
    return stored


def views_open(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """views.open: a new modal stack for the user whose trigger this is."""
    view = check_view(args.get("view"), kind="modal")
    user = _take_trigger(ws, args)
    for old in ws.views.stacks.get(user, []):
        ws.views.views[old].closed = True
    stored = _store(ws, user, view)
    ws.views.stacks[user] = [stored.data["id"]]
    return {"view": copy.deepcopy(stored.data)}


def views_push(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """views.push: a view on top of the user's open modal (3 at most)."""
    view = check_view(args.get("view"), kind="modal")
    user = _take_trigger(ws, args)
    stack = ws.views.stacks.get(user) or []
    if not stack:
        raise ApiError("not_found")
    if len(stack) >= MAX_STACK:
        raise ApiError("push_limit_reached")
    stored = _store(ws, user, view, root_view_id=stack[0], previous_view_id=stack[-1])
    stack.append(stored.data["id"])
    return {"view": copy.deepcopy(stored.data)}


def views_update(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """views.update, by view_id or external_id, refused when `hash` is not the view's current one."""
    view_id = args.get("view_id")
    if not view_id and args.get("external_id"):
        view_id = next((v for v, s in ws.views.views.items() if s.data["external_id"] == args["external_id"]), None)
    if not view_id and not args.get("external_id"):
        raise invalid("missing required field: view_id or external_id")
    stored = ws.views.views.get(str(view_id or ""))
    if stored is None or stored.closed:
        raise ApiError("not_found")
    view = check_view(args.get("view"), kind=stored.data["type"])
    if args.get("hash") and args["hash"] != stored.data["hash"]:
        raise ApiError("hash_conflict")
    ids = {"root_view_id": stored.data["root_view_id"], "previous_view_id": stored.data["previous_view_id"]}
    new = _store(ws, stored.user, view, view_id=stored.data["id"], **ids)
    return {"view": copy.deepcopy(new.data)}


def views_publish(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """views.publish: the user's Home tab (refused when the app's Home tab is off)."""
    user = str(args.get("user_id") or "")
    if not user:
        raise invalid("missing required field: user_id")
    if user not in ws.users:
        raise invalid("invalid `user_id`")
    view = check_view(args.get("view"), kind="home")
    if not ws.views.home_enabled:
        raise ApiError("not_enabled")
    current = ws.views.homes.get(user)
    if args.get("hash") and (current is None or args["hash"] != ws.views.views[current].data["hash"]):
        raise ApiError("hash_conflict")
    stored = _store(ws, user, view, view_id=current)
    ws.views.homes[user] = stored.data["id"]
    return {"view": copy.deepcopy(stored.data)}


METHODS: dict[str, ApiMethod] = {
    "views.open": views_open,
    "views.push": views_push,
    "views.update": views_update,
    "views.publish": views_publish,
}
