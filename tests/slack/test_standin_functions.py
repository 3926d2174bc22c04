"""The stand-in's Workflow Builder steps, through the real slack_sdk WebClient: `functions.completeSuccess` and
`functions.completeError`, each execution completable once, outputs checked against the manifest's functions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.local.slack import SlackStandIn
from bot.local.slack.state import ApiError

INPUTS = {"recipe": "sft-tiny", "channel": "C0TRAIN01", "requester": "U0ALICE01"}
OUTPUTS = {"run_name": "sft-tiny-0123456789", "card_permalink": "https://standin.slack.local/archives/C0TRAIN01/p1"}


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    """A started stand-in."""
    standin = SlackStandIn().start()
    yield standin
    standin.stop()


def client(standin: SlackStandIn, token: str | None = None) -> WebClient:
    """The real WebClient against the stand-in (the bot token unless given)."""
    return WebClient(token=token or standin.bot_token, base_url=standin.base_url)


def error_of(call: object) -> str:
    """Slack's error code of a refused call."""
    with pytest.raises(SlackApiError) as info:
        call()  # type: ignore[operator]
    return str(info.value.response["error"])


def test_the_event_carries_slacks_fields_and_the_declared_parameters(standin: SlackStandIn) -> None:
    event = standin.start_function("start_finetune_run", INPUTS)
    assert event["type"] == "function_executed" and event["inputs"] == INPUTS
    assert event["function_execution_id"].startswith("Fx") and event["workflow_execution_id"].startswith("Wx")
    assert event["bot_access_token"].startswith("xwfp-")
    function = event["function"]
    assert function["callback_id"] == "start_finetune_run" and function["type"] == "app"
    required = {p["name"] for p in function["input_parameters"] if p["is_required"]}
    assert required == {"recipe", "channel", "requester"}
    assert {p["name"] for p in function["output_parameters"]} == {"run_name", "card_permalink"}
    with pytest.raises(ApiError, match="function_not_found"):
        standin.start_function("not_a_step", {})


def test_complete_success_once_with_the_execution_token(standin: SlackStandIn) -> None:
    event = standin.start_function("start_finetune_run", INPUTS)
    execution, token = event["function_execution_id"], event["bot_access_token"]
    workflow = client(standin, token)
    assert workflow.functions_completeSuccess(function_execution_id=execution, outputs=OUTPUTS)["ok"]
    assert standin.function_execution(execution)["state"] == "completed"
    assert standin.function_execution(execution)["outputs"] == OUTPUTS
    # Completed: a second completion is refused, and the execution's token is revoked.
    again = lambda: client(standin).functions_completeError(function_execution_id=execution, error="x")  # noqa: E731
    assert error_of(again) == "execution_not_in_running_state"
    assert error_of(lambda: workflow.auth_test()) == "token_revoked"
    assert standin.function_execution(execution)["completions"] == [
        "functions.completeSuccess",
        "functions.completeError",
    ]


@pytest.mark.parametrize(
    ("outputs", "problem"),
    [
        ({"run_name": "r"}, "missing required output `card_permalink`"),
        ({**OUTPUTS, "status": "succeeded"}, "unknown output `status`"),
        ({**OUTPUTS, "run_name": 7}, "output `run_name` is not of type string"),
    ],
    ids=["missing", "undeclared", "wrong-type"],
)
def test_outputs_are_checked_against_the_manifest(
    standin: SlackStandIn, outputs: dict[str, object], problem: str
) -> None:
    execution = standin.start_function("start_finetune_run", INPUTS)["function_execution_id"]
    with pytest.raises(SlackApiError) as info:
        client(standin).functions_completeSuccess(function_execution_id=execution, outputs=outputs)
    assert info.value.response["error"] == "parameter_validation_failed"
    assert problem in info.value.response["errors"]
    assert standin.function_execution(execution)["state"] == "running"  # still completable


def test_complete_error_and_its_refusals(standin: SlackStandIn) -> None:
    execution = standin.start_function("request_promotion", {"model_version": "m:v1", "stage": "staging"})[
        "function_execution_id"
    ]
    bot = client(standin)
    assert error_of(lambda: bot.functions_completeError(function_execution_id="Fx0NOPE", error="x")) == (
        "function_execution_not_found"
    )
    assert error_of(lambda: bot.functions_completeError(function_execution_id=execution, error=" ")) == (
        "invalid_arguments"
    )
    assert bot.functions_completeError(function_execution_id=execution, error="expired unapproved")["ok"]
    state = standin.function_execution(execution)
    assert (state["state"], state["error"]) == ("failed", "expired unapproved")
    assert error_of(lambda: bot.functions_completeSuccess(function_execution_id=execution, outputs={})) == (
        "execution_not_in_running_state"
    )
    assert error_of(lambda: client(standin, "xwfp-unknown").auth_test()) == "invalid_auth"
