"""A `request_promotion` step completes when its promotion ends, once: approved (completeSuccess, outcome
`approved`), expired or voided (completeError naming why); a stuck claim is told again after a crash."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk import WebClient
from sqlmodel import update

from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.slack.places import PostablePlaces
from bot.steps import REQUEST_PROMOTION, StepService
from bot.steps.complete import RETELL_AFTER
from storage import repos
from storage.db import SessionFactory
from storage.models import StepExecution
from tests.fixtures.runs import create_run

STEP = {"model_version": "tiny-chat:v1", "stage": "production", "requester": "U0ALICE01"}


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    """A started stand-in."""
    standin = SlackStandIn().start()
    yield standin
    standin.stop()


def steps_for(sessions: SessionFactory, standin: SlackStandIn) -> StepService:
    """The step service on the stand-in (no Polyaxon: the promotion itself is recorded by the test)."""
    client = WebClient(token=standin.bot_token, base_url=standin.base_url)
    return StepService(sessions=sessions, client=client, clock=lambda: datetime.now(UTC), places=PostablePlaces())


def waiting_step(sessions: SessionFactory, standin: SlackStandIn) -> str:
    """A request_promotion execution whose promotion was asked (as `ReleaseService.promote` leaves it)."""
    execution = standin.start_function(REQUEST_PROMOTION, STEP)["function_execution_id"]
    with sessions() as s:
        repos.record_step_execution(
            s, function_execution_id=execution, callback_id=REQUEST_PROMOTION, requester="U0ALICE01", inputs=STEP
        )
        repos.update_step_execution(
            s, function_execution_id=execution, model="tiny-chat", version="v1", stage="production"
        )
    return execution


def promotion_request(sessions: SessionFactory, standin: SlackStandIn, status: str, **fields: object) -> str:
    """The promotion's approval request, posted in the version's thread, in `status`; its ts."""
    ts = standin.post_as_user("U0BOT0001", DEFAULT_CHANNEL, "approval request")
    with sessions() as s:
        run = create_run(s, f"sft-tiny-{ts.replace('.', '')[-10:]}")
        repos.create_approval_request(
            s,
            run_id=run.id,
            action="promote",
            model="tiny-chat",
            version="v1",
            stage="production",
            requester="U0ALICE01",
            channel=DEFAULT_CHANNEL,
            message_ts=ts,
            candidate_digest="d" * 64,
            status=status,
            **fields,
        )
        s.commit()
    return ts


@pytest.mark.parametrize(
    ("status", "state", "needle"),
    [
        ("promoted", "completed", "approved"),
        ("expired", "failed", "expired unapproved"),
        ("voided", "failed", "was voided (candidate changed"),
    ],
    ids=["approved", "expired", "voided"],
)
def test_a_promotion_step_completes_once_when_its_request_ends(
    sessions: SessionFactory, standin: SlackStandIn, status: str, state: str, needle: str
) -> None:
    steps = steps_for(sessions, standin)
    execution = waiting_step(sessions, standin)
    promotion_request(sessions, standin, "open")
    assert steps.tick() == 0  # open: the approvers have not decided
    assert standin.function_execution(execution)["state"] == "running"
    with sessions() as s:
        [request] = repos.list_approval_requests(s, action="promote")
        repos.update_approval_request(s, request, status=status, error="candidate changed: a -> b")
    assert steps.tick() == 1
    ended = standin.function_execution(execution)
    assert ended["state"] == state
    if state == "completed":
        assert ended["outputs"]["outcome"] == needle and "/archives/" in ended["outputs"]["request_permalink"]
    else:
        assert needle in ended["error"] and "tiny-chat:v1 to production" in ended["error"]
    assert steps.tick() == 0 and len(ended["completions"]) == 1  # exactly once
    with sessions() as s:
        row = repos.get_step_execution(s, function_execution_id=execution)
    assert row is not None and row.status == "completed"


def test_a_request_from_before_the_step_does_not_end_it(sessions: SessionFactory, standin: SlackStandIn) -> None:
    promotion_request(sessions, standin, "expired")  # an earlier promotion of the same version, long over
    steps = steps_for(sessions, standin)
    execution = waiting_step(sessions, standin)
    assert steps.tick() == 0 and standin.function_execution(execution)["state"] == "running"


def test_an_outcome_claimed_by_a_process_that_died_is_told_once(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    steps = steps_for(sessions, standin)
    execution = waiting_step(sessions, standin)
    long_ago = datetime.now(UTC) - RETELL_AFTER - timedelta(seconds=1)
    with sessions() as s:  # claimed, then the process died before Slack was told
        assert repos.claim_step_completion(
            s, function_execution_id=execution, outputs=None, error="expired unapproved", now=long_ago
        )
    assert steps.tick() == 1
    assert standin.function_execution(execution)["error"] == "expired unapproved"
    # Told already (a second process raced it, say): Slack's answer closes the row, with no second outcome.
    with sessions() as s:
        s.execute(update(StepExecution).values(status="completing"))
        s.commit()
    assert steps.tick() == 1
    assert standin.function_execution(execution)["completions"] == ["functions.completeError"] * 2
    with sessions() as s:
        assert repos.get_step_execution(s, function_execution_id=execution).status == "completed"  # type: ignore[union-attr]


def test_the_registry_telling_a_request_ended_completes_its_step_at_once(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    steps = steps_for(sessions, standin)
    execution = waiting_step(sessions, standin)
    other = waiting_step(sessions, standin)
    with sessions() as s:  # another step waits on another stage: not this request's
        repos.update_step_execution(s, function_execution_id=other, stage="staging")
    promotion_request(sessions, standin, "open")
    with sessions() as s:
        [request] = repos.list_approval_requests(s, action="promote")
        repos.update_approval_request(s, request, status="promoted")
    steps.on_request_ended(request)  # what RequestStates.ended / StageMover.record call
    assert standin.function_execution(execution)["outputs"]["outcome"] == "approved"
    assert standin.function_execution(other)["state"] == "running"
