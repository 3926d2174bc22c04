"""A Workflow Builder step starts a run on the real local Polyaxon stack: delivered twice, it starts one run,
completes once with the run's name and card, and the run goes on to succeed in its card's thread."""

from __future__ import annotations

import pytest
from sqlmodel import col, select

from bot.local.slack.sender import event_envelope
from storage.models import Run
from tests.e2e.conftest import ALICE, CHANNEL, LiveBot
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]


def test_a_step_starts_sft_tiny_once_and_completes_with_its_card(live_bot: LiveBot) -> None:
    inputs = {"recipe": "sft-tiny", "overrides": "max_steps=20 save_steps=10", "channel": CHANNEL, "requester": ALICE}
    event = live_bot.standin.start_function("start_finetune_run", inputs)
    execution = event["function_execution_id"]
    envelope = event_envelope(event)
    # Slack retries a delivery it saw no ack for: the same envelope, the same event_id.
    assert live_bot.sender.event({}, envelope=envelope).status == 200
    assert live_bot.sender.event({}, envelope=envelope, retry_num=1).status == 200
    ended = wait_for(lambda: (e := live_bot.standin.function_execution(execution))["state"] != "running" and e, 120)
    assert ended["state"] == "completed", ended["error"]
    assert ended["completions"] == ["functions.completeSuccess"]
    name = ended["outputs"]["run_name"]
    run = live_bot.run_named(name)
    assert run.requester == ALICE and run.channel == CHANNEL and run.card_ts
    permalink = ended["outputs"]["card_permalink"]
    assert CHANNEL in permalink and run.card_ts.replace(".", "") in permalink, permalink
    with live_bot.runtime.services.sessions() as s:
        later = s.exec(select(Run).where(col(Run.created_at) >= run.created_at)).all()
    assert [r.name for r in later] == [name], "one run for one execution"
    live_bot.wait_status(name, {"succeeded"})


def test_a_step_with_an_unknown_recipe_fails_naming_the_closest(live_bot: LiveBot) -> None:
    inputs = {"recipe": "sft-tiyn", "channel": CHANNEL, "requester": ALICE}
    sent = live_bot.sender.function_executed("start_finetune_run", inputs)
    execution = sent.payload["event"]["function_execution_id"]
    ended = wait_for(lambda: (e := live_bot.standin.function_execution(execution))["state"] != "running" and e, 60)
    assert ended["state"] == "failed" and "sft-tiny" in ended["error"].replace("sft-tiyn", ""), ended["error"]


def test_a_step_for_a_channel_the_bot_is_not_in_fails_before_anything_starts(live_bot: LiveBot) -> None:
    inputs = {"recipe": "sft-tiny", "channel": "C0GENERAL", "requester": ALICE}  # #general: the bot is not a member
    sent = live_bot.sender.function_executed("start_finetune_run", inputs)
    execution = sent.payload["event"]["function_execution_id"]
    ended = wait_for(lambda: (e := live_bot.standin.function_execution(execution))["state"] != "running" and e, 60)
    assert ended["state"] == "failed" and "not a member of this channel" in ended["error"], ended["error"]
    assert "invite the bot there first" in ended["error"]
