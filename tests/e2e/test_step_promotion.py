"""A `request_promotion` Workflow Builder step on the real local Polyaxon: the same serving check and approval
request as `/finetune promote`, completed once when bob's approval moves the stage; a stage the version may not
go to fails at once with the release rules' own words. Long (a training run, a serving check): marked slow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage.models import Run
from tests.e2e.conftest import ALICE, BOB, LiveBot, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.e2e.test_registration import react, status_of
from tests.e2e.test_release import open_request, register, stage
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer, pytest.mark.slow]


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """Bob approves."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("e2e-steps"), approvers=[BOB]) as bot:
        yield bot


@pytest.fixture(scope="module")
def version_run(live_bot: LiveBot) -> Run:
    """One succeeded sft-tiny run (the recipe's defaults: what the shipped prompt set is calibrated on)."""
    name = run_name_in(live_bot.command("run recipe=sft-tiny"))
    return live_bot.wait_status(name, {"succeeded"}, timeout=300)


def step(bot: LiveBot, model_version: str, stage_name: str) -> str:
    """Run the promotion step as alice; its execution id."""
    inputs = {"model_version": model_version, "stage": stage_name, "requester": ALICE}
    sent = bot.sender.function_executed("request_promotion", inputs)
    assert sent.status == 200
    return str(sent.payload["event"]["function_execution_id"])


def ended(bot: LiveBot, execution: str, timeout: float = 60) -> dict[str, object]:
    return dict(wait_for(lambda: (e := bot.standin.function_execution(execution))["state"] != "running" and e, timeout))


def test_a_promotion_step_completes_when_the_approvers_move_the_stage(live_bot: LiveBot, version_run: Run) -> None:
    version = register(live_bot, version_run, "tiny-chat")
    refused = ended(live_bot, step(live_bot, f"tiny-chat:{version}", "production"))
    assert refused["state"] == "failed" and "staging" in str(refused["error"]), refused

    execution = step(live_bot, f"tiny-chat:{version}", "staging")
    request = open_request(live_bot, "tiny-chat", "staging")  # after the serving check passed
    assert request.requester == ALICE
    assert live_bot.standin.function_execution(execution)["state"] == "running"  # the step waits for approvers
    react(live_bot, ALICE, request.message_ts or "")  # the requester's own approval never counts
    react(live_bot, BOB, request.message_ts or "")
    status_of(live_bot, request, {"promoted"}, timeout=60)
    done = ended(live_bot, execution)
    assert done["state"] == "completed" and done["completions"] == ["functions.completeSuccess"], done
    outputs = done["outputs"]
    assert isinstance(outputs, dict) and outputs["outcome"] == "approved"
    assert (request.message_ts or "").replace(".", "") in str(outputs["request_permalink"])
    assert stage(live_bot, "tiny-chat", version) == "staging"
