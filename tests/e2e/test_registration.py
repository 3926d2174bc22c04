"""Approval-gated registration through the real front door: signed reactions in, the stand-in's messages, the
database and Polyaxon's model registry out. One succeeded sft-tiny run serves every test; each test makes its own
request (its own model name), so versions and criteria comparisons never cross tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack.sender import SentRequest
from bot.local.slack.server import BOT_USER_ID
from bot.registry import RECORDED_REACTION, RegistrationService
from storage import repos
from storage.models import ApprovalRequest, Registration, Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.polyaxon import free_closed_port_host
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

CAROL = "U0CAROL01"  # an approver through the S0APPROVE user group only
DAVE = "U0DAVE001"  # in the channel, not an approver
APPROVE = "white_check_mark"


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """A bot whose approvers are bob (by user ID) and the S0APPROVE group (bob + carol)."""
    with start_live_bot(
        polyaxon_stack, tmp_path_factory.mktemp("e2e-registration"), approvers=[BOB, "S0APPROVE"]
    ) as bot:
        bot.standin.add_user(DAVE, "dave")
        yield bot


@pytest.fixture(scope="module")
def tiny_run(live_bot: LiveBot) -> Run:
    """One succeeded sft-tiny run by alice, shared by every test of the module."""
    name = run_name_in(live_bot.command("run recipe=sft-tiny max_steps=20 save_steps=10"))
    return live_bot.wait_status(name, {"succeeded"}, timeout=300)


@pytest.fixture
def registry(live_bot: LiveBot) -> Iterator[RegistrationService]:
    """The bot's registration service; a test may change its quorum or gateway, restored afterwards."""
    service = live_bot.runtime.services.registry
    assert service is not None
    quorum, gateway = service.quorum, service.gateway
    yield service
    service.quorum, service.gateway = quorum, gateway


# --- helpers ------------------------------------------------------------------------------------


def request_for(bot: LiveBot, model: str) -> ApprovalRequest:
    """The newest approval request for `model`, fresh from the database."""
    with bot.runtime.services.sessions() as s:
        found = list(repos.list_approval_requests(s, model=model))
    assert found, model
    return found[-1]


def ask(bot: LiveBot, run: Run, model: str, *, user: str = ALICE, extra: str = "") -> ApprovalRequest:
    """`/finetune register RUN model=MODEL` and the request it made."""
    reply = reply_text(bot.command(f"register {run.name} model={model} {extra}".strip(), user=user))
    assert "Posted the" in reply and "approval request" in reply, reply
    return request_for(bot, model)


def react(
    bot: LiveBot, user: str, ts: str, *, reaction: str = APPROVE, added: bool = True, **kwargs: Any
) -> SentRequest:
    """A person adds (or removes) a reaction, and Slack sends the signed event."""
    if added:
        bot.standin.react_as_user(user, CHANNEL, ts, reaction)
    else:
        bot.standin.unreact_as_user(user, CHANNEL, ts, reaction)
    kind = "reaction_added" if added else "reaction_removed"
    sent = bot.sender.reaction(kind, user=user, channel=CHANNEL, ts=ts, reaction=reaction, **kwargs)
    assert sent.status == 200, sent.body
    return sent


def status_of(
    bot: LiveBot, request: ApprovalRequest, statuses: set[str], timeout: float = 60, *, with_error: bool = False
) -> ApprovalRequest:
    """Wait until the request reaches one of `statuses` (and, `with_error`, holds the reason an attempt failed)."""

    def check() -> ApprovalRequest | None:
        with bot.runtime.services.sessions() as s:
            fresh = repos.get_approval_request(s, request_id=request.id or 0)
        if fresh is None or fresh.status not in statuses or (with_error and not fresh.error):
            return None
        return fresh

    return wait_for(check, timeout=timeout, interval=0.2)


def approvers_of(bot: LiveBot, request: ApprovalRequest) -> list[str]:
    """Users whose approval of the request is active."""
    with bot.runtime.services.sessions() as s:
        return [a.user for a in repos.active_approvals(s, request_id=request.id or 0)]


def registrations(bot: LiveBot, model: str) -> list[Registration]:
    """The model's registration rows."""
    with bot.runtime.services.sessions() as s:
        return list(repos.list_registrations(s, model=model))


def thread(bot: LiveBot, run: Run) -> list[str]:
    """The run's thread as text."""
    return bot.thread(bot.run_named(run.name))


def notices(bot: LiveBot, run: Run, needle: str) -> list[str]:
    """Thread messages containing `needle`."""
    return [t for t in thread(bot, run) if needle in t]


def audit_of(bot: LiveBot, request: ApprovalRequest) -> list[tuple[str, str, str]]:
    """(user, outcome, detail) of the audit entries about reactions on the request."""
    with bot.runtime.services.sessions() as s:
        entries = repos.list_audit_for_run(s, run_id=request.run_id)
    return [
        (e.user, e.outcome, e.detail or "") for e in entries if e.command.endswith(f"on approval request {request.id}")
    ]


def settle(bot: LiveBot, seconds: float = 1.5) -> None:
    """Let deferred work on earlier deliveries finish before asserting that nothing (more) happened."""
    import time

    time.sleep(seconds)


def expire_now(bot: LiveBot, request: ApprovalRequest) -> None:
    """Move the request's expiry into the past, as if its TTL had run out."""
    with bot.runtime.services.sessions() as s:
        row = repos.get_approval_request(s, request_id=request.id or 0)
        assert row is not None and row.expires_at is not None
        repos.update_approval_request(s, row, expires_at=row.created_at - timedelta(minutes=1))


# --- tests --------------------------------------------------------------------------------------


def test_quorum_one_registers_the_candidate_shown_in_the_request(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    request = ask(live_bot, tiny_run, "reg-q1")
    assert request.status == "open" and request.quorum == 1
    # One message, in the run's thread and sent to the channel.
    assert request.message_ts in {m["ts"] for m in live_bot.standin.messages(CHANNEL)}
    assert request.message_ts in {m["ts"] for m in live_bot.standin.replies(CHANNEL, tiny_run.card_ts or "")}
    shown = str(live_bot.standin.message(CHANNEL, request.message_ts or "").get("blocks"))
    candidate = request.candidate or {}
    assert tiny_run.name in shown and "eval_loss" in shown
    assert candidate["checkpoint_digest"] and candidate["checkpoint_digest"] in shown
    assert candidate["eval_contract_hash"] and candidate["eval_contract_hash"] in shown
    assert "artifact checkpoint" in shown and "artifact eval_results" in shown and "default.yaml" in shown
    assert "no version is registered yet" in shown

    react(live_bot, BOB, request.message_ts or "")
    done = status_of(live_bot, request, {"registered"})
    [registration] = registrations(live_bot, "reg-q1")
    assert registration.version == "v1" and registration.run_id == tiny_run.id
    # Polyaxon holds the version, bound to the run, with the checkpoint and eval artifacts.
    remote = registry.gateway.get_model_version(registration.polyaxon_version or "")
    assert remote.run_uuid == tiny_run.polyaxon_uuid
    assert {"model", "eval_results"} <= set(remote.artifacts)
    assert not {"cpu", "memory", "load", "env"} & set(remote.artifacts)  # run lineage, not the model's
    # The bot's recorded reaction comes after the database row (it is what `recorded_at` marks).
    wait_for(lambda: live_bot.standin.reactions(CHANNEL, request.message_ts or "").get(RECORDED_REACTION))
    assert live_bot.standin.reactions(CHANNEL, request.message_ts or "")[RECORDED_REACTION] == [BOT_USER_ID]
    assert done.decided_at is not None
    [summary] = wait_for(lambda: notices(live_bot, tiny_run, "Registered *reg-q1:v1*"))
    assert f"<@{BOB}>" in summary and "slack.local/archives" in summary and "pass" in summary
    # The chain, from storage and Polyaxon.
    traced = reply_text(live_bot.command("trace reg-q1:v1"))
    for part in (tiny_run.name, "sft-tiny", "stage testing", f"<@{ALICE}>", f"<@{BOB}> approved", "Checkpoint"):
        assert part in traced, (part, traced)
    assert "is not registered" in reply_text(live_bot.command("trace reg-q1:v9"))


def test_register_refuses_a_run_that_has_not_succeeded(live_bot: LiveBot, tiny_run: Run) -> None:
    with live_bot.runtime.services.sessions() as s:
        repos.create_run(
            s,
            name="sft-tiny-notdone001",
            recipe_name="sft-tiny",
            recipe_hash="h",
            requester=ALICE,
            channel=CHANNEL,
            status="failed",
        )
    refused = reply_text(live_bot.command("register sft-tiny-notdone001 model=reg-refused"))
    assert "is failed: only a run that succeeded can be registered" in refused
    with live_bot.runtime.services.sessions() as s:
        assert not repos.list_approval_requests(s, model="reg-refused")


def test_quorum_two_counts_distinct_approvers_and_a_user_group_member(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    registry.quorum = 2
    request = ask(live_bot, tiny_run, "reg-q2")
    react(live_bot, BOB, request.message_ts or "")
    wait_for(lambda: approvers_of(live_bot, request) == [BOB])
    assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{BOB}> approved `reg-q2` (1/2)"))
    assert status_of(live_bot, request, {"open"})
    react(live_bot, CAROL, request.message_ts or "")  # an approver only through S0APPROVE
    status_of(live_bot, request, {"registered"})
    assert [r.version for r in registrations(live_bot, "reg-q2")] == ["v1"]
    [summary] = wait_for(lambda: notices(live_bot, tiny_run, "Registered *reg-q2:v1*"))
    assert f"<@{BOB}>" in summary and f"<@{CAROL}>" in summary


def test_self_approval_and_non_approvers_are_ignored_audited_and_answered_once(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    request = ask(live_bot, tiny_run, "reg-self", user=CAROL)  # carol asks to register alice's run
    ts = request.message_ts or ""
    react(live_bot, CAROL, ts)
    react(live_bot, ALICE, ts)
    react(live_bot, DAVE, ts)
    wait_for(lambda: len(audit_of(live_bot, request)) == 3)
    assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{CAROL}> can't approve their own request"))
    assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{ALICE}> can't approve a run they started"))
    assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{DAVE}> is not an approver"))
    # Dave tries again: audited again, answered once.
    react(live_bot, DAVE, ts, added=False)
    react(live_bot, DAVE, ts)
    wait_for(lambda: len(audit_of(live_bot, request)) == 5)
    settle(live_bot)
    assert len(notices(live_bot, tiny_run, f"<@{DAVE}> is not an approver")) == 1
    audit = audit_of(live_bot, request)
    assert {(u, o, d.split(":")[0]) for u, o, d in audit} >= {
        (CAROL, "ignored", "self_approval"),
        (ALICE, "ignored", "self_approval"),
        (DAVE, "ignored", "not_approver"),
    }
    assert approvers_of(live_bot, request) == [] and status_of(live_bot, request, {"open"})
    react(live_bot, BOB, ts)
    status_of(live_bot, request, {"registered"})


def test_wrong_message_and_wrong_emoji_do_not_count(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    request = ask(live_bot, tiny_run, "reg-wrong")
    react(live_bot, BOB, tiny_run.card_ts or "")  # the approval emoji, on the run's card
    assert wait_for(lambda: notices(live_bot, tiny_run, "approvals count only as :white_check_mark: on the approval"))
    react(live_bot, BOB, request.message_ts or "", reaction="thumbsup")
    assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{BOB}>'s :thumbsup: is not counted"))
    wait_for(lambda: len(audit_of(live_bot, request)) == 2)
    assert {d.split(":")[0] for _, _, d in audit_of(live_bot, request)} == {"wrong_message", "wrong_emoji"}
    settle(live_bot)
    assert approvers_of(live_bot, request) == [] and status_of(live_bot, request, {"open"})
    # A reaction on a message that is nobody's approval business is ignored silently.
    before = len(thread(live_bot, tiny_run))
    other = live_bot.standin.post_as_user(DAVE, CHANNEL, "lunch?")
    react(live_bot, BOB, other)
    settle(live_bot)
    assert len(thread(live_bot, tiny_run)) == before


def test_removal_before_registration_revokes_and_after_registration_changes_nothing(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    registry.quorum = 2
    request = ask(live_bot, tiny_run, "reg-revoke")
    ts = request.message_ts or ""
    react(live_bot, BOB, ts)
    wait_for(lambda: approvers_of(live_bot, request) == [BOB])
    react(live_bot, BOB, ts, added=False)
    wait_for(lambda: approvers_of(live_bot, request) == [])
    assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{BOB}> withdrew their approval of `reg-revoke` (0/2)"))
    react(live_bot, CAROL, ts)
    wait_for(lambda: approvers_of(live_bot, request) == [CAROL])
    assert status_of(live_bot, request, {"open"})  # the revoked approval does not count toward the quorum
    react(live_bot, BOB, ts)
    status_of(live_bot, request, {"registered"})
    react(live_bot, CAROL, ts, added=False)
    assert wait_for(lambda: notices(live_bot, tiny_run, "`reg-revoke:v1` stays registered"))
    assert len(registrations(live_bot, "reg-revoke")) == 1
    assert sorted(approvers_of(live_bot, request)) == sorted([BOB, CAROL])
    traced = reply_text(live_bot.command("trace reg-revoke"))
    assert f"<@{BOB}> revoked" in traced and f"<@{CAROL}> approved" in traced


def test_concurrent_approvals_and_retried_deliveries_register_exactly_once(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    registry.quorum = 2
    request = ask(live_bot, tiny_run, "reg-race")
    ts = request.message_ts or ""
    live_bot.standin.react_as_user(BOB, CHANNEL, ts, APPROVE)
    live_bot.standin.react_as_user(CAROL, CHANNEL, ts, APPROVE)
    sends = []
    for user in (BOB, CAROL):
        event_id = f"Ev{uuid.uuid4().hex[:10].upper()}"
        for retry in (None, 1, 2):  # Slack's retries carry the same event_id
            sends.append((user, event_id, retry))
    with ThreadPoolExecutor(len(sends)) as pool:
        results = list(
            pool.map(
                lambda a: live_bot.sender.reaction(
                    "reaction_added", user=a[0], channel=CHANNEL, ts=ts, reaction=APPROVE, event_id=a[1], retry_num=a[2]
                ),
                sends,
            )
        )
    assert all(r.status == 200 for r in results)
    status_of(live_bot, request, {"registered"})
    settle(live_bot, 3)
    assert len(registrations(live_bot, "reg-race")) == 1
    assert len(notices(live_bot, tiny_run, "Registered *reg-race:v1*")) == 1
    assert live_bot.standin.reactions(CHANNEL, ts)[RECORDED_REACTION] == [BOT_USER_ID]
    assert sorted(approvers_of(live_bot, request)) == sorted([BOB, CAROL])
    assert len([a for a in audit_of(live_bot, request) if a[1] == "ok"]) == 2


def test_duplicate_deliveries_of_one_approval_count_once(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    registry.quorum = 2
    request = ask(live_bot, tiny_run, "reg-dupe")
    ts = request.message_ts or ""
    first = react(live_bot, BOB, ts)
    event_id = first.payload["event_id"]
    for retry in (1, 2):
        again = live_bot.sender.reaction(
            "reaction_added", user=BOB, channel=CHANNEL, ts=ts, reaction=APPROVE, event_id=event_id, retry_num=retry
        )
        assert again.status == 200
    # Even a second event for the same reaction (a different event_id) is judged a duplicate.
    live_bot.sender.reaction("reaction_added", user=BOB, channel=CHANNEL, ts=ts, reaction=APPROVE)
    wait_for(lambda: len(audit_of(live_bot, request)) == 2)
    settle(live_bot)
    assert approvers_of(live_bot, request) == [BOB]
    # The two deliveries are judged concurrently: either may be audited first, exactly one counts.
    assert sorted(d for _, _, d in audit_of(live_bot, request)) == ["counts", "duplicate"]
    assert len(notices(live_bot, tiny_run, f"<@{BOB}> approved `reg-dupe` (1/2)")) == 1
    assert status_of(live_bot, request, {"open"}) and not registrations(live_bot, "reg-dupe")


def test_expired_request_is_ignored(live_bot: LiveBot, tiny_run: Run, registry: RegistrationService) -> None:
    request = ask(live_bot, tiny_run, "reg-expired")
    expire_now(live_bot, request)
    react(live_bot, BOB, request.message_ts or "")
    status_of(live_bot, request, {"expired"})
    assert wait_for(lambda: notices(live_bot, tiny_run, "this request has expired"))
    assert approvers_of(live_bot, request) == [] and not registrations(live_bot, "reg-expired")
    # Closed by the watcher's sweep or by the reaction, whichever came first: the thread is told once.
    settle(live_bot, 2.5)
    assert len(notices(live_bot, tiny_run, "The approval request for `reg-expired` expired unapproved (0/1")) == 1


def test_an_expired_request_is_closed_by_the_watcher_without_any_reaction(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    request = ask(live_bot, tiny_run, "reg-lapsed")
    expire_now(live_bot, request)
    status_of(live_bot, request, {"expired"}, timeout=30)
    assert wait_for(lambda: notices(live_bot, tiny_run, "`reg-lapsed` expired unapproved"))


def test_polyaxon_down_at_registration_stays_approved_and_registers_on_retry(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    from bot.polyaxon import PolyaxonGateway

    request = ask(live_bot, tiny_run, "reg-down")
    real = registry.gateway
    registry.gateway = PolyaxonGateway(host=free_closed_port_host(), token=None, timeout_s=2.0, write_attempts=1)
    react(live_bot, BOB, request.message_ts or "")
    pending = status_of(live_bot, request, {"approved"})
    assert pending.error and "unreachable" in pending.error
    assert wait_for(lambda: notices(live_bot, tiny_run, "stays *approved*, nothing is lost"))
    assert not registrations(live_bot, "reg-down")
    registry.gateway = real  # Polyaxon is back: the watcher's next tick registers it
    status_of(live_bot, request, {"registered"}, timeout=60)
    [registration] = registrations(live_bot, "reg-down")
    assert real.get_model_version(registration.polyaxon_version or "").run_uuid == tiny_run.polyaxon_uuid
    assert approvers_of(live_bot, request) == [BOB]
    wait_for(lambda: live_bot.standin.reactions(CHANNEL, request.message_ts or "").get(RECORDED_REACTION))
    assert len(notices(live_bot, tiny_run, "stays *approved*, nothing is lost")) == 1


def test_removal_while_registration_waits_for_polyaxon_revokes_and_reopens(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    from bot.polyaxon import PolyaxonGateway

    request = ask(live_bot, tiny_run, "reg-held")
    ts = request.message_ts or ""
    watcher = live_bot.runtime.watcher
    assert watcher is not None
    real = registry.gateway
    registry.gateway = PolyaxonGateway(host=free_closed_port_host(), token=None, timeout_s=2.0, write_attempts=1)
    watcher.registry = None  # no background retry while the test holds the request in `approved`
    try:
        react(live_bot, BOB, ts)
        status_of(live_bot, request, {"approved"})
        react(live_bot, BOB, ts, added=False)  # before registration: it revokes, and the quorum is gone
        status_of(live_bot, request, {"open"})
        assert wait_for(lambda: notices(live_bot, tiny_run, f"<@{BOB}> withdrew their approval of `reg-held` (0/1)"))
        assert approvers_of(live_bot, request) == []
    finally:
        registry.gateway = real
        watcher.registry = registry
    settle(live_bot, 2.5)  # the watcher's retries find nothing approved
    assert status_of(live_bot, request, {"open"}) and not registrations(live_bot, "reg-held")
    react(live_bot, CAROL, ts)
    status_of(live_bot, request, {"registered"})
    assert approvers_of(live_bot, request) == [CAROL]
    [summary] = wait_for(lambda: notices(live_bot, tiny_run, "Registered *reg-held:v1*"))
    assert f"<@{CAROL}>" in summary and f"<@{BOB}>" not in summary


def test_an_explicit_version_taken_meanwhile_voids_the_request(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    request = ask(live_bot, tiny_run, "reg-taken", extra="version=v7")
    assert request.version == "v7"
    with live_bot.runtime.services.sessions() as s:  # another request registered reg-taken:v7 in the meantime
        repos.create_registration(
            s, model="reg-taken", version="v7", run_id=tiny_run.id, artifacts=[], polyaxon_version="reg-taken-v7"
        )
    react(live_bot, BOB, request.message_ts or "")
    voided = status_of(live_bot, request, {"voided"})
    assert voided.error == "reg-taken:v7 was registered by another request"
    assert wait_for(lambda: notices(live_bot, tiny_run, "`reg-taken:v7` is *voided*: that version was registered"))
    assert [r.version for r in registrations(live_bot, "reg-taken")] == ["v7"]  # only the other one


def test_a_summary_posted_just_before_a_crash_is_not_posted_again(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    request = ask(live_bot, tiny_run, "reg-crash")
    react(live_bot, BOB, request.message_ts or "")
    status_of(live_bot, request, {"registered"})
    assert wait_for(lambda: notices(live_bot, tiny_run, "Registered *reg-crash:v1*"))
    wait_for(lambda: (r := request_for(live_bot, "reg-crash")).recorded_at is not None and r)
    # As if the process died after posting the summary and before noting it: the next retry finds the post.
    with live_bot.runtime.services.sessions() as s:
        row = repos.get_approval_request(s, request_id=request.id or 0)
        assert row is not None
        repos.update_approval_request(s, row, recorded_at=None, claimed_at=row.created_at - timedelta(hours=1))
    registry.retry_pending()
    assert request_for(live_bot, "reg-crash").recorded_at is not None
    settle(live_bot)
    assert len(notices(live_bot, tiny_run, "Registered *reg-crash:v1*")) == 1


def test_candidate_changed_after_approval_voids_the_request(
    live_bot: LiveBot, tiny_run: Run, registry: RegistrationService
) -> None:
    # Last in the module: it re-evaluates the shared run.
    from polyaxon._schemas.client import ClientConfig
    from polyaxon.client import PolyaxonClient, RunClient

    registry.quorum = 2
    request = ask(live_bot, tiny_run, "reg-changed")
    ts = request.message_ts or ""
    react(live_bot, BOB, ts)
    wait_for(lambda: approvers_of(live_bot, request) == [BOB])
    gateway = registry.gateway
    client = PolyaxonClient(config=ClientConfig(host=gateway.host, use_https=False, verify_ssl=False))
    run_client = RunClient(owner=gateway.owner, project=gateway.project, run_uuid=tiny_run.polyaxon_uuid, client=client)
    evaluated = (request.candidate or {})["eval_results"]["eval_loss"]

    def reevaluate() -> bool:
        try:
            run_client.log_outputs(async_req=False, eval_loss=evaluated + 0.5)
        except Exception:  # the sandbox's spurious 405 on overlapping writes: try again
            return False
        return gateway.get_run(tiny_run.polyaxon_uuid or "").outputs.get("eval_loss") == evaluated + 0.5

    wait_for(reevaluate, timeout=30, interval=0.5)
    react(live_bot, CAROL, ts)
    status_of(live_bot, request, {"voided"})
    assert wait_for(lambda: notices(live_bot, tiny_run, "is *voided*: the candidate changed"))
    assert wait_for(lambda: notices(live_bot, tiny_run, "this request was voided"))
    assert not registrations(live_bot, "reg-changed")
    # Re-issued, the request binds the new candidate.
    again = ask(live_bot, tiny_run, "reg-changed")
    assert again.id != request.id and again.candidate_digest != request.candidate_digest
    assert (again.candidate or {})["eval_results"]["eval_loss"] == evaluated + 0.5
