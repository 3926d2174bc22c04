"""Workflow Builder steps through the real front door: signed `function_executed` deliveries in, the stand-in's
recorded completions out."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from storage import repos
from tests.fixtures.slack import BotServer, wait_for

STEP = "start_finetune_run"


def run_step(sender: SlackSender, inputs: dict[str, Any], callback_id: str = STEP) -> tuple[str, dict[str, Any]]:
    """Send one execution of a step; (its id, how it ended once it ended)."""
    assert sender.standin is not None
    sent = sender.function_executed(callback_id, inputs)
    assert sent.status == 200 and sent.body == ""  # Bolt's function listener acks at once
    execution = sent.payload["event"]["function_execution_id"]
    ended = wait_for(lambda: (e := sender.standin.function_execution(execution))["state"] != "running" and e)  # type: ignore[union-attr]
    return execution, ended


def inputs(**fields: str) -> dict[str, Any]:
    """start_finetune_run's inputs: sft-tiny in the default channel, by alice, with `fields` over them."""
    return {"recipe": "sft-tiny", "channel": DEFAULT_CHANNEL, "requester": "U0ALICE01", **fields}


def test_an_unknown_recipe_fails_with_the_closest_names(sender: SlackSender) -> None:
    _, ended = run_step(sender, inputs(recipe="sft-tinny"))
    assert ended["state"] == "failed"
    assert "sft-tinny" in ended["error"] and "sft-tiny" in ended["error"].replace("sft-tinny", "")
    assert ended["completions"] == ["functions.completeError"]


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"overrides": "lr=3e-4 --force"}, "`--force` is a flag"),
        ({"overrides": "preset=cpu-small"}, "`preset=` is an input of its own"),
        ({"overrides": "lr"}, "`lr` is not KEY=VALUE"),
        ({"channel": "#ml-training"}, "`channel` input is not a Slack channel"),
        ({"requester": "alice"}, "`requester` input is not a Slack user"),
        ({"recipe": ""}, "needs its `recipe` input"),
        ({"overrides": "lr=$(whoami)"}, "bad step inputs"),
    ],
    ids=["flag", "own-key", "not-key-value", "channel-name", "requester-name", "no-recipe", "shell"],
)
def test_bad_inputs_fail_with_a_specific_error(sender: SlackSender, fields: dict[str, str], needle: str) -> None:
    _, ended = run_step(sender, inputs(**fields))
    assert ended["state"] == "failed" and needle in ended["error"], ended["error"]


def test_a_step_delivered_again_is_carried_out_once(
    send: SlackSender, slack_standin: SlackStandIn, repo_bot: BotServer
) -> None:
    event = slack_standin.start_function(STEP, inputs())
    execution = event["function_execution_id"]
    from bot.local.slack.sender import event_envelope

    envelope = event_envelope(event)
    with ThreadPoolExecutor(4) as pool:
        sent = list(pool.map(lambda n: send.event({}, envelope=envelope, retry_num=n or None), range(4)))
    assert [s.status for s in sent] == [200] * 4
    ended = wait_for(lambda: (e := slack_standin.function_execution(execution))["state"] != "running" and e)
    # This bot has no Polyaxon: the recipe plans, and the step says why no run started, once.
    assert "without Polyaxon" in ended["error"]
    wait_for(lambda: all(d.state == "done" for d in repo_bot.deliveries("event")))
    assert len(repo_bot.deliveries("event")) == 1 and ended["completions"] == ["functions.completeError"]
    with repo_bot.services.sessions() as s:
        row = repos.get_step_execution(s, function_execution_id=execution)
    assert row is not None and row.status == "completed" and row.requester == "U0ALICE01"
    # The stored delivery never holds the execution's token.
    assert all("bot_access_token" not in str(d.payload) for d in repo_bot.deliveries("event"))


def test_a_promotion_step_without_polyaxon_fails_at_once(sender: SlackSender) -> None:
    step = {"model_version": "tiny-chat:v1", "stage": "prod", "requester": "U0ALICE01"}
    _, ended = run_step(sender, step, callback_id="request_promotion")
    assert "is not a release stage" in ended["error"] and "production" in ended["error"]
    _, ended = run_step(sender, {**step, "stage": "production"}, callback_id="request_promotion")
    assert "without Polyaxon" in ended["error"]


def test_a_function_that_is_not_an_object_is_refused_at_the_door(sender: SlackSender, bot_server: BotServer) -> None:
    assert sender.standin is not None
    event = sender.standin.start_function(STEP, inputs())
    sent = sender.event({**event, "function": "start_finetune_run"})
    assert sent.status == 400 and "function not an object" in sent.body
    assert bot_server.deliveries("event") == []
