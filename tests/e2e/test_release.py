"""The release path through the real front door, on the real local Polyaxon: serving checks that run the real
`python -m trainer.serving` on the tiny model, promotion by approval reactions, stages moved in Polyaxon's
model registry, a rollback, and the signed webhook to a local receiver that is down, then up.

One succeeded sft-tiny run serves the module; its model is registered as `tiny-chat` v1 and v2 (one run, two
versions: what a rollback needs without a second training run).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlmodel import col, select

from bot.catalog.digests import sha256_file
from bot.local.polyaxon import LocalPolyaxonStack
from bot.release import ReleaseService
from storage import repos
from storage.models import ApprovalRequest, Run, ServingCheck
from tests.e2e.conftest import ALICE, BOB, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.e2e.test_registration import CAROL, DAVE, ask, react, status_of
from tests.fixtures.polyaxon import free_closed_port_host
from tests.fixtures.slack import wait_for
from tests.fixtures.webhook import WebhookReceiver

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

SECRET = "whsec-e2e-release-0123456789"


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    """The deployment pipeline's receiver: down until a test brings it up."""
    hook = WebhookReceiver(SECRET)
    hook.down()
    yield hook
    hook.down()


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack,
    tiny_model: Path,
    tmp_path_factory: pytest.TempPathFactory,
    receiver: WebhookReceiver,
) -> Iterator[LiveBot]:
    """Approvers bob and (through S0APPROVE) carol; the release webhook points at the receiver."""
    with start_live_bot(
        polyaxon_stack,
        tmp_path_factory.mktemp("e2e-release"),
        approvers=[BOB, "S0APPROVE"],
        finetune={"release_webhook_url": receiver.url, "release_webhook_secret": SecretStr(SECRET)},
    ) as bot:
        bot.standin.add_user(DAVE, "dave")
        release = bot.runtime.services.release
        assert release is not None
        release.webhook.max_retry_s = 2.0  # the backoff, shortened: the receiver comes back within the test
        yield bot


@pytest.fixture(scope="module")
def version_run(live_bot: LiveBot) -> Run:
    """One succeeded sft-tiny run (the recipe's defaults: what the shipped prompt set is calibrated on)."""
    name = run_name_in(live_bot.command("run recipe=sft-tiny"))
    return live_bot.wait_status(name, {"succeeded"}, timeout=300)


def release(bot: LiveBot) -> ReleaseService:
    service = bot.runtime.services.release
    assert service is not None
    return service


def register(bot: LiveBot, run: Run, model: str) -> str:
    """Register the run's model and approve it (bob): the version registered."""
    request = ask(bot, run, model)
    react(bot, BOB, request.message_ts or "")
    done = status_of(bot, request, {"registered"}, timeout=120)
    assert done.version is not None
    return done.version


def stage(bot: LiveBot, model: str, version: str) -> str | None:
    """The version's stage in Polyaxon's model registry."""
    with bot.runtime.services.sessions() as s:
        registration = repos.get_registration(s, model=model, version=version)
    assert registration is not None
    return release(bot).ledger.gateway.get_model_version(registration.polyaxon_version or "").stage


def checks(bot: LiveBot, model: str) -> list[ServingCheck]:
    with bot.runtime.services.sessions() as s:
        return list(s.exec(select(ServingCheck).where(ServingCheck.model == model).order_by(col(ServingCheck.id))))


def promotions(bot: LiveBot, model: str) -> list[ApprovalRequest]:
    with bot.runtime.services.sessions() as s:
        return list(repos.list_approval_requests(s, model=model, action="promote"))


def reactions_judged(bot: LiveBot, user: str) -> list[str]:
    """The person's added reactions the bot judged (each is audited), newest first."""
    with bot.runtime.services.sessions() as s:
        return [a.command for a in repos.list_audit(s, user=user) if a.command.startswith("reaction_added")]


def thread_text(bot: LiveBot, run: Run) -> str:
    return "\n".join(bot.thread(bot.run_named(run.name)))


def settled(bot: LiveBot, model: str, count: int) -> ServingCheck:
    """Wait until `count` serving checks of the model are settled; the newest."""
    done = wait_for(
        lambda: (c := [x for x in checks(bot, model) if x.status != "running"]) and len(c) >= count and c[-1],
        timeout=240,
        interval=0.5,
    )
    assert isinstance(done, ServingCheck)
    return done


def open_request(bot: LiveBot, model: str, stage_name: str) -> ApprovalRequest:
    found = wait_for(
        lambda: next((r for r in promotions(bot, model) if r.stage == stage_name and r.status == "open"), None),
        timeout=60,
        interval=0.3,
    )
    assert isinstance(found, ApprovalRequest)
    return found


def test_promote_to_staging_then_production_then_rollback_with_the_webhook_down_then_up(
    live_bot: LiveBot, version_run: Run, receiver: WebhookReceiver
) -> None:
    v1 = register(live_bot, version_run, "tiny-chat")
    assert stage(live_bot, "tiny-chat", v1) == "testing"

    # Production only from staging; a version that does not exist names the ones that do.
    refused = reply_text(live_bot.command(f"promote tiny-chat:{v1} stage=production"))
    assert "takes a version from `staging` only" in refused, refused
    missing = reply_text(live_bot.command("promote tiny-chat:v9 stage=staging"))
    assert "not registered" in missing and v1 in missing, missing

    # Staging: the serving check runs the real job on the tiny model, then the request follows.
    started = reply_text(live_bot.command(f"promote tiny-chat:{v1} stage=staging"))
    assert "Started serving check" in started, started
    check = settled(live_bot, "tiny-chat", 1)
    assert check.status == "passed", check.verdict
    report = check.report or {}
    assert report["chat_template"]["applied"] and report["expectations_passed"], report
    assert report["load_time_s"] > 0 and report["latency_ms"]["p95"] > 0 and report["tokens_per_s"] > 0
    request = open_request(live_bot, "tiny-chat", "staging")
    assert request.quorum == 1 and request.requester == ALICE
    text = thread_text(live_bot, version_run)
    assert f"Serving check #{check.id} of tiny-chat:{v1}: passed" in text, text
    assert f"Approval request: promote tiny-chat:{v1} to staging" in text, text

    # A ✅ on the check's report approves nothing: answered once in the thread with where approvals count, even
    # when it is taken off and put on again.
    with live_bot.runtime.services.sessions() as s:
        report_post = repos.find_posted_message(s, run_id=check.run_id or 0, purpose="serving_report")
    assert report_post is not None
    react(live_bot, CAROL, report_post.ts)
    answer = f"<@{CAROL}>: a serving check is not approved by reaction"
    assert wait_for(lambda: answer in thread_text(live_bot, version_run))
    react(live_bot, CAROL, report_post.ts, added=False)
    react(live_bot, CAROL, report_post.ts)
    assert wait_for(lambda: len(reactions_judged(live_bot, CAROL)) == 2)
    assert thread_text(live_bot, version_run).count(answer) == 1
    assert f"the request to promote `tiny-chat:{v1}` → staging" in thread_text(live_bot, version_run)
    criteria = {c["name"]: c["passed"] for c in request.criteria}
    assert criteria == {
        "serving check passed": True,
        "serving budgets met": True,
        "staging only from testing or disabled": True,
        "quorum for staging": True,
    }, request.criteria

    # The requester and a non-approver do not count; bob does, and the stage moves in Polyaxon.
    react(live_bot, ALICE, request.message_ts or "")
    react(live_bot, DAVE, request.message_ts or "")
    assert wait_for(lambda: f"<@{ALICE}> can't approve their own request" in thread_text(live_bot, version_run))
    assert wait_for(lambda: f"<@{DAVE}> is not an approver" in thread_text(live_bot, version_run))
    assert status_of(live_bot, request, {"open"}).status == "open"
    react(live_bot, BOB, request.message_ts or "")
    status_of(live_bot, request, {"promoted"}, timeout=60)
    assert stage(live_bot, "tiny-chat", v1) == "staging"
    assert wait_for(lambda: "is now in *staging*" in thread_text(live_bot, version_run))
    assert thread_text(live_bot, version_run).count("is now in *staging*") == 1

    # Production reuses the passed check (same version, same prompt set) and needs two approvals.
    reused = reply_text(live_bot.command(f"promote tiny-chat:{v1} stage=production"))
    assert "passed already" in reused, reused
    assert len(checks(live_bot, "tiny-chat")) == 1
    production = open_request(live_bot, "tiny-chat", "production")
    assert production.quorum == 2
    react(live_bot, BOB, production.message_ts or "")
    assert wait_for(lambda: f"approved `tiny-chat:{v1}` → production (1/2)" in thread_text(live_bot, version_run))
    assert stage(live_bot, "tiny-chat", v1) == "staging"
    react(live_bot, CAROL, production.message_ts or "")
    status_of(live_bot, production, {"promoted"}, timeout=60)
    assert stage(live_bot, "tiny-chat", v1) == "production"

    # A second version through staging to production retires v1; a rollback restores it.
    v2 = register(live_bot, version_run, "tiny-chat")
    live_bot.command(f"promote tiny-chat:{v2} stage=staging")
    assert settled(live_bot, "tiny-chat", 2).status == "passed"
    react(live_bot, BOB, open_request(live_bot, "tiny-chat", "staging").message_ts or "")
    wait_for(lambda: stage(live_bot, "tiny-chat", v2) == "staging", timeout=60)
    live_bot.command(f"promote tiny-chat:{v2} stage=production")
    to_production = open_request(live_bot, "tiny-chat", "production")
    react(live_bot, BOB, to_production.message_ts or "")
    react(live_bot, CAROL, to_production.message_ts or "")
    status_of(live_bot, to_production, {"promoted"}, timeout=60)
    assert (stage(live_bot, "tiny-chat", v2), stage(live_bot, "tiny-chat", v1)) == ("production", "disabled")

    not_allowed = reply_text(live_bot.command("rollback tiny-chat stage=production", user=ALICE))
    assert "only an approver may roll back" in not_allowed, not_allowed
    rolled = reply_text(live_bot.command("rollback tiny-chat stage=production", user=BOB))
    assert f"`tiny-chat:{v1}` is in production again" in rolled, rolled
    assert (stage(live_bot, "tiny-chat", v1), stage(live_bot, "tiny-chat", v2)) == ("production", "disabled")
    nothing = reply_text(live_bot.command("rollback tiny-chat stage=production", user=BOB))
    assert "no earlier one to restore" in nothing, nothing

    # trace: every stage change with its serving check and approvers.
    trace = reply_text(live_bot.command(f"trace tiny-chat:{v1}"))
    for needle in ("testing → staging", "staging → production", "production → disabled", "disabled → production"):
        assert needle in trace, trace
    assert f"approved by <@{BOB}>, <@{CAROL}>" in trace and "serving check #" in trace, trace

    # The receiver was down for all of it: the failure was said once, nothing was blocked. Up: each event once.
    with live_bot.runtime.services.sessions() as s:
        changes = list(repos.list_stage_changes(s, model="tiny-chat"))
        queued = list(repos.list_release_events(s))
    assert len(changes) == 7 and len(queued) == 7
    assert any(e.attempts >= 1 and e.last_error for e in queued)
    assert thread_text(live_bot, version_run).count("The release webhook did not take the event") == 1
    receiver.up()
    wait_for(lambda: len(receiver.keys()) >= 7, timeout=60, interval=0.5)
    live_bot_settle = wait_for(
        lambda: all(e.status == "delivered" for e in list_events(live_bot)), timeout=30, interval=0.5
    )
    assert live_bot_settle
    assert sorted(receiver.keys()) == sorted(e.event_id for e in queued), "each event exactly once"
    assert all(valid for _, _, valid in receiver.deliveries)
    kinds = [(e["version"], e["from_stage"], e["to_stage"], e["change"]) for e in receiver.events()]
    assert kinds[0] == (v1, "testing", "staging", "promote")
    assert kinds[-2:] == [(v1, "disabled", "production", "rollback"), (v2, "production", "disabled", "rolled_back")]
    assert receiver.events()[1]["approvers"] == [BOB, CAROL]


def list_events(bot: LiveBot) -> list[Any]:
    with bot.runtime.services.sessions() as s:
        return list(repos.list_release_events(s))


def test_a_failing_serving_check_blocks_the_request_with_its_evidence(
    live_bot: LiveBot, version_run: Run, tmp_path: Path
) -> None:
    """A prompt set with an exact expectation the model does not meet, and a latency budget no model meets."""
    prompts = tmp_path / "strict-prompts.jsonl"
    prompts.write_text(
        json.dumps(
            {
                "id": "exact-capital",
                "messages": [{"role": "user", "content": "What is the capital of Egypt?"}],
                "expect": {"exact": "The capital of Egypt is Cairo."},
            }
        )
        + "\n"
    )
    catalog = live_bot.runtime.services.runs.deps.catalog  # type: ignore[union-attr]
    recipe = catalog.recipes["sft-tiny"]
    serving = recipe.spec.serving
    assert serving is not None
    strict = serving.model_copy(
        update={
            "prompts": serving.prompts.model_copy(
                update={"path": str(prompts), "digest": "sha256:" + sha256_file(prompts)}
            ),
            "budgets": serving.budgets.model_copy(update={"latency_p95_ms": 0.001}),
        }
    )
    catalog.recipes["sft-tiny"] = recipe.model_copy(update={"spec": recipe.spec.model_copy(update={"serving": strict})})
    try:
        version = register(live_bot, version_run, "tiny-chat-strict")
        started = reply_text(live_bot.command(f"promote tiny-chat-strict:{version} stage=staging"))
        assert "Started serving check" in started, started
        check = settled(live_bot, "tiny-chat-strict", 1)
    finally:
        catalog.recipes["sft-tiny"] = recipe
    assert check.status == "failed"
    failed = {c["name"]: c for c in check.verdict if not c["passed"]}
    assert (
        "every prompt's expectations" in failed and "exact-capital" in failed["every prompt's expectations"]["evidence"]
    )
    assert "latency p95 (ms) <= 0.001" in failed, check.verdict
    text = wait_for(lambda: "FAILED" in (t := thread_text(live_bot, version_run)) and t)
    assert f"Serving check #{check.id} of tiny-chat-strict:{version}: FAILED" in text
    assert "The promotion to staging is blocked" in text and "exact-capital" in text, text
    assert not promotions(live_bot, "tiny-chat-strict"), "no approval request for a failed check"
    assert stage(live_bot, "tiny-chat-strict", version) == "testing"


def test_polyaxon_down_at_quorum_then_a_withdrawn_approval_then_a_stage_moved_outside_the_bot(
    live_bot: LiveBot, version_run: Run
) -> None:
    from bot.polyaxon import PolyaxonGateway

    registry = live_bot.runtime.services.registry
    assert registry is not None
    version = register(live_bot, version_run, "tiny-chat-ops")
    live_bot.command(f"promote tiny-chat-ops:{version} stage=staging")
    assert settled(live_bot, "tiny-chat-ops", 1).status == "passed"
    request = open_request(live_bot, "tiny-chat-ops", "staging")

    # Polyaxon is down when the quorum is reached: the request stays approved, said once, moved on a later tick.
    real = registry.gateway
    registry.gateway = PolyaxonGateway(host=free_closed_port_host(), token=None, timeout_s=2.0, write_attempts=1)
    try:
        react(live_bot, BOB, request.message_ts or "")
        # `approved` with the reason: the quorum makes it `approved` (no error yet) before the attempt that fails.
        pending = status_of(live_bot, request, {"approved"}, timeout=60, with_error=True)
        assert wait_for(lambda: "Polyaxon did not take the stage" in thread_text(live_bot, version_run))
    finally:
        registry.gateway = real
    assert pending.error
    status_of(live_bot, request, {"promoted"}, timeout=60)
    assert stage(live_bot, "tiny-chat-ops", version) == "staging"
    assert thread_text(live_bot, version_run).count("Polyaxon did not take the stage") == 1

    # Production: an approval withdrawn before the quorum no longer counts.
    live_bot.command(f"promote tiny-chat-ops:{version} stage=production")
    production = open_request(live_bot, "tiny-chat-ops", "production")
    react(live_bot, BOB, production.message_ts or "")
    assert wait_for(
        lambda: f"approved `tiny-chat-ops:{version}` → production (1/2)" in thread_text(live_bot, version_run)
    )
    react(live_bot, BOB, production.message_ts or "", added=False)
    assert wait_for(
        lambda: (
            f"withdrew their approval of `tiny-chat-ops:{version}` → production (0/2)"
            in thread_text(live_bot, version_run)
        )
    )

    # Someone moves the version in Polyaxon by hand: the request no longer describes it, so the next approval voids it.
    with live_bot.runtime.services.sessions() as s:
        registration = repos.get_registration(s, model="tiny-chat-ops", version=version)
    assert registration is not None
    real.stage_model_version(registration.polyaxon_version or "", "testing", reason="by hand, outside the bot")
    react(live_bot, CAROL, production.message_ts or "")
    assert status_of(live_bot, production, {"voided"}, timeout=60).status == "voided"
    assert wait_for(lambda: "is *voided*: the version changed" in thread_text(live_bot, version_run))
    assert stage(live_bot, "tiny-chat-ops", version) == "testing"
