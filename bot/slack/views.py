"""Views (modals and the Home tab): pure builders within Slack's limits, and the calls that show them.

Limits kept here: a title, submit or close label of at most 24 characters, 100 blocks per view, 3,000
characters of private_metadata, option texts of 75 and values of 150 characters, 100 options per select.
Every capability builds its views with these. A trigger id is good once and for 3 s: `open_modal` is called
right after the ack, and a slow answer goes into the modal it opened (`show_in_modal`), never a second one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from bot.slack.blocks import clip, context, section

MAX_TITLE = 24
MAX_VIEW_BLOCKS = 100
MAX_METADATA = 3000
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_OPTIONS = 100
MAX_HINT = 2000
MAX_ERROR = 500

View = dict[str, Any]


class ViewError(Exception):
    """Slack refused a views.* call (an expired trigger, a view changed meanwhile, a refused view)."""

    def __init__(self, error: str, method: str) -> None:
        super().__init__(f"{method}: {error}")
        self.error = error
        self.method = method


def plain(text: str, limit: int = MAX_HINT) -> dict[str, Any]:
    """A plain_text object, clipped."""
    return {"type": "plain_text", "text": clip(text, limit), "emoji": True}


def option(value: str, text: str | None = None, description: str | None = None) -> dict[str, Any]:
    """A select option (text and description clipped to 75, value to 150 characters)."""
    opt: dict[str, Any] = {"text": plain(text or value, MAX_OPTION_TEXT), "value": value[:MAX_OPTION_VALUE]}
    if description:
        opt["description"] = plain(description, MAX_OPTION_TEXT)
    return opt


def input_block(
    block_id: str,
    label: str,
    element: dict[str, Any],
    *,
    hint: str | None = None,
    optional: bool = False,
    dispatch: bool = False,
) -> dict[str, Any]:
    """An input block around one element."""
    block: dict[str, Any] = {
        "type": "input",
        "block_id": block_id,
        "label": plain(label, MAX_HINT),
        "element": element,
        "optional": optional,
    }
    if hint:
        block["hint"] = plain(hint, MAX_HINT)
    if dispatch:
        block["dispatch_action"] = True
    return block


def button(text: str, action_id: str, value: str | None = None, *, style: str | None = None) -> dict[str, Any]:
    """A button (text clipped to 75 characters)."""
    element: dict[str, Any] = {"type": "button", "text": plain(text, MAX_OPTION_TEXT), "action_id": action_id}
    if value is not None:
        element["value"] = value
    if style:
        element["style"] = style
    return element


def modal(
    title: str,
    blocks: list[dict[str, Any]],
    *,
    callback_id: str = "",
    submit: str | None = None,
    close: str = "Close",
    private_metadata: str = "",
) -> View:
    """A modal view; blocks past 100 are cut with a last line that says so."""
    if len(private_metadata) > MAX_METADATA:
        raise ValueError(f"private_metadata over {MAX_METADATA} characters")
    view: View = {
        "type": "modal",
        "callback_id": callback_id,
        "title": plain(title, MAX_TITLE),
        "close": plain(close, MAX_TITLE),
        "blocks": cap_view_blocks(blocks),
        "private_metadata": private_metadata,
    }
    if submit:
        view["submit"] = plain(submit, MAX_TITLE)
    return view


def home(blocks: list[dict[str, Any]], *, callback_id: str = "") -> View:
    """A Home tab view."""
    return {"type": "home", "callback_id": callback_id, "blocks": cap_view_blocks(blocks)}


def cap_view_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most 100 blocks; the last says that more were left out."""
    if len(blocks) <= MAX_VIEW_BLOCKS:
        return blocks
    return [*blocks[: MAX_VIEW_BLOCKS - 1], context("…more than fits in one view.")]


def message_modal(title: str, blocks: list[dict[str, Any]]) -> View:
    """A read-only modal showing a reply (the blocks a command would have answered ephemerally)."""
    return modal(title, blocks or [section("Done.")])


def open_modal(client: WebClient, trigger_id: str, view: View) -> View:
    """views.open; the opened view (its id and hash). ViewError when Slack refuses (an expired trigger)."""
    return _call("views.open", lambda: client.views_open(trigger_id=trigger_id, view=view))


def push_modal(client: WebClient, trigger_id: str, view: View) -> View:
    """views.push onto the modal the trigger came from."""
    return _call("views.push", lambda: client.views_push(trigger_id=trigger_id, view=view))


def update_modal(client: WebClient, view_id: str, view: View, *, hash_: str | None = None) -> View:
    """views.update; with `hash_`, refused (ViewError `hash_conflict`) when the view changed since it was read."""
    return _call("views.update", lambda: client.views_update(view_id=view_id, view=view, hash=hash_))


def publish_home(client: WebClient, user: str, view: View) -> View:
    """views.publish of a user's Home tab."""
    return _call("views.publish", lambda: client.views_publish(user_id=user, view=view))


def show_in_modal(client: WebClient, trigger_id: str, title: str, work: Callable[[], list[dict[str, Any]]]) -> bool:
    """Open a modal saying the work is under way, run `work()`, and show the blocks it returns in that modal.

    For answers to actions without a response_url (buttons on the Home tab): the trigger is spent at once,
    so however long the work takes its answer still reaches the person. The work runs even when the modal
    cannot open (a trigger expired: a delivery carried out again after a crash): what was asked is done, and
    False says nobody saw the answer.
    """
    working = message_modal(title, [section(":hourglass_flowing_sand: Working on it…")])
    try:
        opened: View | None = open_modal(client, trigger_id, working)
    except ViewError:
        opened = None
    blocks = work()
    if opened is None:
        return False
    update_modal(client, str(opened["id"]), message_modal(title, blocks))
    return True


def _call(method: str, call: Callable[[], SlackResponse]) -> View:
    try:
        response = call()
    except SlackApiError as exc:
        raise ViewError(str(exc.response.get("error") or "error"), method) from exc
    view = response.get("view")
    return dict(view) if isinstance(view, dict) else {}
