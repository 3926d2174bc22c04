"""The stand-in's views.* answer the unmodified WebClient as Slack does: triggers, limits, hashes, stacks, Home."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.local.slack import SlackStandIn

ALICE = "U0ALICE01"


@pytest.fixture
def client(slack_standin: SlackStandIn) -> WebClient:
    """A plain WebClient (no retries) on the stand-in."""
    return WebClient(base_url=slack_standin.base_url, token=slack_standin.bot_token, retry_handlers=[])


def _error(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as info:
        call()
    return dict(info.value.response.data)  # type: ignore[arg-type]


def _input(block_id: str, initial: str | None = None) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": "value"}
    if initial is not None:
        element["initial_value"] = initial
    return {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": block_id},
        "element": element,
    }


def _modal(*blocks: dict[str, Any], title: str = "Form") -> dict[str, Any]:
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Go"},
        "blocks": list(blocks) or [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    }


def test_a_trigger_opens_one_view_once_within_3_seconds(client: WebClient, slack_standin: SlackStandIn) -> None:
    assert _error(lambda: client.views_open(trigger_id="", view=_modal()))["error"] == "invalid_arguments"
    assert _error(lambda: client.views_open(trigger_id="1.2.abc", view=_modal()))["error"] == "invalid_trigger_id"
    trigger = slack_standin.views.mint_trigger(ALICE)
    opened = client.views_open(trigger_id=trigger, view=_modal())["view"]
    assert opened["id"].startswith("V") and opened["hash"] and opened["root_view_id"] == opened["id"]
    assert _error(lambda: client.views_open(trigger_id=trigger, view=_modal()))["error"] == "exchanged_trigger_id"
    late = slack_standin.views.mint_trigger(ALICE)
    slack_standin.state.views.triggers[late].issued_at -= 3.5  # Slack honours a trigger for 3 s
    assert _error(lambda: client.views_open(trigger_id=late, view=_modal()))["error"] == "expired_trigger_id"
    assert slack_standin.views.top(ALICE)["id"] == opened["id"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("view", "message"),
    [
        (_modal(title="A title longer than twenty-four"), "title must be between 1 and 24 characters"),
        ({**_modal(), "blocks": [{"type": "divider"}] * 101}, "between 1 and 100 blocks"),
        (_modal(_input("a"), _input("a")), "duplicate block_id 'a'"),
        ({**_modal(_input("a")), "submit": None}, "needs a submit button"),
        ({**_modal(), "private_metadata": "x" * 3001}, "private_metadata cannot exceed 3000"),
        (
            _modal({"type": "input", "block_id": "b", "label": {"type": "plain_text", "text": "x"}}),
            "element",
        ),
        (
            _modal(
                {
                    "type": "input",
                    "block_id": "s",
                    "label": {"type": "plain_text", "text": "pick"},
                    "element": {
                        "type": "static_select",
                        "action_id": "v",
                        "options": [{"text": {"type": "plain_text", "text": "x" * 76}, "value": "x"}],
                    },
                }
            ),
            "option text must be 1 to 75",
        ),
    ],
    ids=["long-title", "101-blocks", "duplicate-block-id", "inputs-without-submit", "metadata", "no-element", "option"],
)
def test_views_are_checked_like_slack(
    client: WebClient, slack_standin: SlackStandIn, view: dict[str, Any], message: str
) -> None:
    answer = _error(lambda: client.views_open(trigger_id=slack_standin.views.mint_trigger(ALICE), view=view))
    assert answer["error"] == "invalid_arguments"
    assert any(message in m for m in answer["response_metadata"]["messages"]), answer


def test_a_view_over_250_kb_is_too_large(client: WebClient, slack_standin: SlackStandIn) -> None:
    text = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 2900}}
    view = {**_modal(), "blocks": [text] * 90}
    trigger = slack_standin.views.mint_trigger(ALICE)
    assert _error(lambda: client.views_open(trigger_id=trigger, view=view))["error"] == "view_too_large"


def test_update_keeps_entries_of_unchanged_fields_and_refuses_a_stale_hash(
    client: WebClient, slack_standin: SlackStandIn
) -> None:
    trigger = slack_standin.views.mint_trigger(ALICE)
    first = client.views_open(trigger_id=trigger, view=_modal(_input("kept", "a"), _input("reset", "b")))["view"]
    slack_standin.views.enter(first["id"], "kept", "typed")
    slack_standin.views.enter(first["id"], "reset", "typed too")
    new = _modal(_input("kept", "a2"), _input("renamed", "b2"))
    second = client.views_update(view_id=first["id"], view=new, hash=first["hash"])["view"]
    values = second["state"]["values"]
    assert values["kept"]["value"]["value"] == "typed"  # same block_id and action_id: Slack keeps what was typed
    assert values["renamed"]["value"]["value"] == "b2"  # a new block_id starts from its initial value
    assert second["hash"] != first["hash"]
    stale = _error(lambda: client.views_update(view_id=first["id"], view=new, hash=first["hash"]))
    assert stale["error"] == "hash_conflict"
    assert _error(lambda: client.views_update(view_id="VNOPE", view=new))["error"] == "not_found"


def test_push_stacks_three_views_at_most(client: WebClient, slack_standin: SlackStandIn) -> None:
    root = client.views_open(trigger_id=slack_standin.views.mint_trigger(ALICE), view=_modal())["view"]
    for _ in range(2):
        pushed = client.views_push(trigger_id=slack_standin.views.mint_trigger(ALICE), view=_modal())["view"]
        assert pushed["root_view_id"] == root["id"]
    full = _error(lambda: client.views_push(trigger_id=slack_standin.views.mint_trigger(ALICE), view=_modal()))
    assert full["error"] == "push_limit_reached"
    assert len(slack_standin.views.open_views(ALICE)) == 3


def test_publish_home_tabs(client: WebClient, slack_standin: SlackStandIn) -> None:
    home = {"type": "home", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]}
    assert _error(lambda: client.views_publish(user_id=ALICE, view=_modal()))["error"] == "invalid_arguments"
    assert _error(lambda: client.views_publish(user_id="U0NOBODY", view=home))["error"] == "invalid_arguments"
    first = client.views_publish(user_id=ALICE, view=home)["view"]
    again = client.views_publish(user_id=ALICE, view=home, hash=first["hash"])["view"]
    assert again["id"] == first["id"] and again["type"] == "home"
    assert (
        _error(lambda: client.views_publish(user_id=ALICE, view=home, hash=first["hash"]))["error"] == "hash_conflict"
    )
    slack_standin.views.set_home_enabled(False)
    assert _error(lambda: client.views_publish(user_id=ALICE, view=home))["error"] == "not_enabled"
