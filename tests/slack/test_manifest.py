"""The Slack app manifest declares exactly the commands and bot events `build_app` handles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.sender import block_actions_payload, reaction_event
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.local.slack.viewing import submission_payload
from bot.slack.blocks import COMMAND_ACTION_ID
from bot.steps import STEP_CALLBACKS
from handlers.forms import RERUN_CALLBACK
from tests.fixtures.slack import BotServer, wait_for

MANIFEST = Path(__file__).resolve().parents[2] / "manifests" / "slack" / "app-manifest.yaml"

# Bot events an app like this could plausibly subscribe to: each must be handled iff the manifest lists it.
CANDIDATE_EVENTS = (
    "reaction_added",
    "reaction_removed",
    "app_mention",
    "message",
    "app_home_opened",
    "member_joined_channel",
    "member_left_channel",
    "channel_created",
    "channel_rename",
    "pin_added",
    "file_shared",
    "team_join",
    "user_change",
    "link_shared",
    "app_uninstalled",
    "tokens_revoked",
    "subteam_members_changed",
    "function_executed",
)
# Parameter types a custom step may declare (Slack's built-in types; docs.slack.dev "Data types").
PARAMETER_TYPES = {
    "string",
    "integer",
    "number",
    "boolean",
    "slack#/types/user_id",
    "slack#/types/channel_id",
    "slack#/types/usergroup_id",
    "slack#/types/timestamp",
    "slack#/types/date",
    "slack#/types/rich_text",
    "slack#/types/message_ts",
    "slack#/types/message_context",
}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    """The parsed manifest."""
    data: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return data


def _event(kind: str, standin: SlackStandIn) -> dict[str, Any]:
    if kind == "function_executed":  # only a step this app declares sends one, with its execution
        return standin.start_function("start_finetune_run", {"recipe": "sft-tiny"})
    if kind.startswith("reaction_"):
        return reaction_event(kind, user="U0BOB0001", channel=DEFAULT_CHANNEL, ts="1.000001", reaction="eyes")
    return {"type": kind, "user": "U0BOB0001", "channel": DEFAULT_CHANNEL, "text": "hi", "ts": "1.000002"}


def test_bot_events_are_exactly_the_handled_ones(
    manifest: dict[str, Any], sender: SlackSender, bot_server: BotServer
) -> None:
    subscribed = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert subscribed <= set(CANDIDATE_EVENTS)
    assert sender.standin is not None
    handled = {kind for kind in CANDIDATE_EVENTS if sender.event(_event(kind, sender.standin)).status == 200}
    # Bolt answers 404 to an event nobody listens to, and Slack would retry it.
    assert handled == subscribed
    wait_for(lambda: len(bot_server.deliveries("event")) == len(subscribed))


def test_slash_commands_are_exactly_the_handled_ones(manifest: dict[str, Any], sender: SlackSender) -> None:
    declared = {c["command"] for c in manifest["features"]["slash_commands"]}
    assert declared == {"/finetune"}
    for command in (*declared, "/finetune-other", "/deploy"):
        assert sender.slash_command("help", command=command).status == (200 if command in declared else 404)


def test_interactivity_and_socket_mode(
    manifest: dict[str, Any], sender: SlackSender, slack_standin: SlackStandIn
) -> None:
    settings = manifest["settings"]
    assert settings["interactivity"]["is_enabled"] is True and settings["socket_mode_enabled"] is True
    url = slack_standin.new_response_url(channel=DEFAULT_CHANNEL, user="U0ALICE01")
    assert sender.interactivity(block_actions_payload(COMMAND_ACTION_ID, "help", response_url=url)).status == 200
    assert sender.interactivity(block_actions_payload("something_else", "x", response_url=url)).status == 404
    wait_for(lambda: slack_standin.response_url_posts())


def test_scopes_are_least_privilege(manifest: dict[str, Any]) -> None:
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"commands", "chat:write", "reactions:read", "reactions:write"} <= scopes
    assert "user" not in manifest["oauth_config"]["scopes"]  # no user-token scopes at all
    broad = {s for s in scopes if s.endswith(":history") or s.startswith("admin") or s.endswith(":write.public")}
    # The one read: after a crash, a run's own thread, to tell whether a status post already went out.
    assert broad == {"channels:history"}, "the bot stores what it posted; it never writes everywhere"


def test_shortcuts_are_exactly_the_handled_ones(manifest: dict[str, Any], sender: SlackSender) -> None:
    shortcuts = manifest["features"]["shortcuts"]
    assert all(s["type"] == "message" and len(s["description"]) <= 80 for s in shortcuts)
    declared = {s["callback_id"] for s in shortcuts}
    assert declared == {RERUN_CALLBACK}
    assert sender.standin is not None
    ts = sender.standin.post_as_user("U0BOB0001", DEFAULT_CHANNEL, "a message to act on")
    for callback in (*declared, "some_other_shortcut"):
        status = sender.message_shortcut(callback, channel_id=DEFAULT_CHANNEL, message_ts=ts).status
        assert status == (200 if callback in declared else 404), callback


def test_the_home_tab_is_on_exactly_when_its_event_is_handled(manifest: dict[str, Any], sender: SlackSender) -> None:
    home = manifest["features"]["app_home"]
    assert home["home_tab_enabled"] is True
    # Direct messages from the bot are read there (notify=dm); nobody writes to it, so no message.im events.
    assert home["messages_tab_enabled"] is True and home["messages_tab_read_only_enabled"] is True
    assert "message.im" not in manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "app_home_opened" in manifest["settings"]["event_subscriptions"]["bot_events"]
    assert sender.home_opened("U0ALICE01").status == 200
    assert sender.standin is not None
    wait_for(lambda: sender.standin.views.home("U0ALICE01"))  # type: ignore[union-attr]


def test_form_submissions_are_handled_for_the_run_form_only(sender: SlackSender) -> None:
    assert sender.standin is not None
    assert sender.slash_command("run").status == 200
    view = wait_for(lambda: sender.standin.views.top("U0ALICE01"))  # type: ignore[union-attr]
    other = {**view, "callback_id": "some_other_form"}
    with sender.standin.state.lock:
        payload = submission_payload(sender.standin.state, view["id"])
    assert sender.interactivity({**payload, "view": other}).status == 404
    assert sender.submit_view(view["id"])[0].status == 200


def test_steps_are_exactly_the_handled_ones(manifest: dict[str, Any], sender: SlackSender) -> None:
    declared = set(manifest["functions"])
    assert declared == set(STEP_CALLBACKS)
    assert sender.standin is not None
    for callback_id in declared:
        assert sender.function_executed(callback_id, {}).status == 200, callback_id
    # A function_executed of a step the app does not declare has no listener: Bolt answers 404.
    event = sender.standin.start_function("start_finetune_run", {})
    other = {**event, "function": {**event["function"], "callback_id": "some_other_step"}}
    assert sender.event(other).status == 404
    settings = manifest["settings"]
    assert "function_executed" in settings["event_subscriptions"]["bot_events"]
    # Custom steps run on the app's own servers, in an org-ready app (Slack's requirements for Bolt steps).
    assert settings["function_runtime"] == "remote" and settings["org_deploy_enabled"] is True


def test_step_parameters_are_typed_and_required_ones_declared(manifest: dict[str, Any]) -> None:
    for callback_id, function in manifest["functions"].items():
        assert function["title"] and len(function["description"]) <= 100, callback_id
        for which in ("input_parameters", "output_parameters"):
            params = function[which]
            properties = params["properties"]
            assert set(params.get("required") or []) <= set(properties), (callback_id, which)
            for name, spec in properties.items():
                assert spec["type"] in PARAMETER_TYPES, (callback_id, name, spec["type"])
                assert spec["title"] and spec["description"], (callback_id, name)
    # What the bot reads and writes, by name: the inputs its checks take and the outputs it completes with.
    start = manifest["functions"]["start_finetune_run"]
    assert set(start["input_parameters"]["properties"]) == {"recipe", "presets", "overrides", "channel", "requester"}
    assert start["input_parameters"]["properties"]["channel"]["type"] == "slack#/types/channel_id"
    assert set(start["output_parameters"]["properties"]) == {"run_name", "card_permalink"}
    promote = manifest["functions"]["request_promotion"]
    assert set(promote["input_parameters"]["properties"]) == {"model_version", "stage", "requester"}
    assert set(promote["output_parameters"]["properties"]) == {"outcome", "request_permalink"}
