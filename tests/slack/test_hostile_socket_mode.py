"""Issue 15 over Socket Mode: malformed payloads go through the same checks as HTTP bodies.

The websocket is Slack's (opened with the app token), so there is no signature to check; a payload of a
shape Slack never sends is acked (Slack would resend it otherwise), logged in one line and goes no further.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from bot.local.slack import SlackStandIn
from bot.local.slack.sender import block_actions_payload, event_envelope, reaction_event, slash_command_fields
from bot.services import Services
from tests.fixtures.hostile import Trap
from tests.fixtures.slack import wait_for


def _cases(url: str) -> dict[str, tuple[str, dict[str, Any], str]]:
    command = slash_command_fields("run recipe=sft-tiny note=secret-words", response_url=url)
    reaction = event_envelope(
        reaction_event("reaction_added", user="U0BOB0001", channel="C0TRAIN01", ts="1.000001", reaction="eyes")
    )
    button = block_actions_payload("finetune_command", "help", response_url=url)
    return {
        "command-without-response_url": (
            "slash_commands",
            {k: v for k, v in command.items() if k != "response_url"},
            "slash command without response_url",
        ),
        "command-text-a-number": ("slash_commands", {**command, "text": 5}, "slash command without text"),
        "event-not-an-object": ("events_api", {**reaction, "event": "x"}, "event not an object"),
        "event-user-a-list": (
            "events_api",
            {**reaction, "event": {**reaction["event"], "user": [1]}},
            "user not an id",
        ),
        "actions-a-string": ("interactive", {**button, "actions": "x"}, "actions not a list of objects"),
        "action-without-action_id": ("interactive", {**button, "actions": [{}]}, "without actions and their action_id"),
    }


@pytest.mark.parametrize("case", list(_cases("http://127.0.0.1:9/x")))
def test_a_malformed_socket_mode_payload_is_acked_and_goes_no_further(
    socket_bot: Services, slack_standin: SlackStandIn, trap: Trap, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    caplog.set_level(logging.INFO)
    envelope_type, payload, detail = _cases(trap.url())[case]
    caplog.clear()
    ack = slack_standin.socket_mode.deliver(envelope_type, payload)
    assert ack is not None and ack["envelope_id"]  # acked: Slack does not resend it
    time.sleep(0.3)
    assert trap.hits == [] and slack_standin.response_url_posts() == []
    assert socket_bot.work.in_flight == 0
    metrics = socket_bot.metrics.registry
    assert metrics.get_sample_value("finetune_bot_requests_refused_total", {"reason": "malformed"}) == 1
    assert not metrics.get_sample_value("finetune_bot_listener_errors_total", {"kind": "command"})
    lines = [r.getMessage() for r in caplog.records if r.name == "finetune_bot.web"]
    assert len(lines) == 1 and "(socket mode) answered 400" in lines[0] and detail in lines[0], lines
    for secret in ("secret-words", trap.url(), "standin-verification-token"):
        assert secret not in caplog.text


def test_a_good_command_after_a_malformed_one_is_carried_out(socket_bot: Services, slack_standin: SlackStandIn) -> None:
    url = slack_standin.new_response_url(channel="C0TRAIN01", user="U0ALICE01")
    fields = slash_command_fields("help", response_url=url)
    slack_standin.socket_mode.deliver("slash_commands", {**fields, "response_url": ""})
    assert slack_standin.socket_mode.deliver("slash_commands", fields) is not None
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    assert post["payload"]["response_type"] == "ephemeral"
