"""From one job to many: output retrieval, the smoke-first gate and the distributed preflight, end to end.

Driven through the front door (signed slash commands) against the real local Polyaxon stack, real TRL
training (under torchrun with gloo for the preflight) and the Slack stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.grammar import RunCommand, parse_command
from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Preflight, Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.e2e.test_reports_add_up import assert_ran_and_used_agree
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

CAROL = "U0CAROL01"  # a second approver
APPROVE = "white_check_mark"


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """One bot for this module (BOB and CAROL approve)."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("preflight"), approvers=[BOB, CAROL]) as bot:
        yield bot


def thread_text(bot: LiveBot, run: Run) -> str:
    """The run's thread: each post's text and its blocks' texts."""
    fresh = bot.run_named(run.name)
    assert fresh.card_ts is not None
    return "\n".join(reply_text(m) for m in bot.standin.replies(CHANNEL, fresh.card_ts))


def preflight_of(bot: LiveBot, run: Run) -> Preflight:
    with bot.runtime.services.sessions() as s:
        row = repos.preflight_for_run(s, run_id=run.id or 0)
    assert row is not None
    return row


# --- outputs --------------------------------------------------------------------------------------


def test_outputs_are_read_back_checked_confirmed_and_a_tampered_checkpoint_is_caught(
    live_bot: LiveBot, polyaxon_stack: LocalPolyaxonStack
) -> None:
    name = run_name_in(live_bot.command("run recipe=sft-tiny max_steps=20 save_steps=10"))
    run = live_bot.wait_status(name, {"succeeded"}, timeout=300)

    reply = reply_text(live_bot.command(f"outputs {name}"))
    assert "confirmed" in reply and "not confirmed" not in reply, reply
    run = live_bot.run_named(name)
    assert run.outputs_confirmed_at is not None and run.outputs_check and run.outputs_check["confirmed"]
    thread = thread_text(live_bot, run)
    for needle in ("checkpoint-10", "checkpoint-20", "(step 20)", "content matches the recorded digest"):
        assert needle in thread, thread
    assert f"polyaxon ops artifacts -p default/{live_bot.runtime.settings.polyaxon.project}" in thread
    assert "-d outputs/checkpoint-20" in thread and "-f outputs/eval_results.json" in thread, thread
    assert "eval_loss=" in thread and "polyaxon ops logs" in thread, thread
    [upload] = [f for f in live_bot.standin.files() if f.get("name", "").endswith("eval_results.json")]
    assert json.loads(upload["content"])["contract_hash"] == run.eval_contract_hash
    card = reply_text(live_bot.card(run))
    assert "Outputs confirmed" in card, card

    # One byte of a checkpoint's weights changed in the store, size unchanged: caught, and no longer confirmed.
    weights = Path(polyaxon_stack.store) / str(run.polyaxon_uuid) / "outputs" / "checkpoint-10" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    reply = reply_text(live_bot.command(f"outputs {name}"))
    assert "not confirmed" in reply, reply
    run = live_bot.run_named(name)
    assert run.outputs_confirmed_at is None
    assert any("checkpoint-10: content differs" in p for p in (run.outputs_check or {}).get("problems", []))
    assert "model.safetensors" in thread_text(live_bot, run)


def test_outputs_of_an_unknown_run_are_refused(live_bot: LiveBot) -> None:
    reply = reply_text(live_bot.command("outputs nosuchrun"))
    assert "no run" in reply.lower(), reply


# --- the gate and the preflight -------------------------------------------------------------------


def test_a_distributed_run_waits_for_its_preflight_which_passes_and_unlocks_it(live_bot: LiveBot) -> None:
    refused = reply_text(live_bot.command("run recipe=sft-tiny-ddp"))
    assert "/finetune preflight recipe=sft-tiny-ddp preset=ddp-cpu-2" in refused, refused
    assert "checkpoint recovery" in refused and "--skip-preflight" in refused, refused
    not_approver = reply_text(live_bot.command("run recipe=sft-tiny-ddp --skip-preflight", user=ALICE))
    assert "only an approver may `--skip-preflight`" in not_approver, not_approver
    dry = reply_text(live_bot.command("run recipe=sft-tiny-ddp --dry-run"))
    assert "not validated" in dry and "2 ranks" in dry, dry

    name = run_name_in(live_bot.command("preflight recipe=sft-tiny-ddp"))
    run = live_bot.run_named(name)
    assert run.kind == "preflight" and "preflight" in reply_text(live_bot.card(run))
    run = live_bot.wait_status(name, {"succeeded", "failed"}, timeout=600)
    row = wait_for(lambda: (p := preflight_of(live_bot, run)).status != "running" and p, timeout=120, interval=0.5)
    # The report is stored, then posted: wait for the post.
    thread = wait_for(lambda: "Preflight" in (t := thread_text(live_bot, run)) and t, timeout=60, interval=0.5)
    assert row.status == "passed", thread
    assert row.report is not None and {line["name"] for line in row.report["lines"]} == {
        "memory",
        "communication",
        "checkpoint_recovery",
        "launcher",
    }
    assert all(line["ok"] for line in row.report["lines"]), row.report
    for needle in ("Preflight passed", "Memory", "Communication", "Checkpoint recovery", "Launcher distributes"):
        assert needle in thread, thread
    # A preflight is accounted like every run: its card's hours are its running time, and usage counts it.
    assert_ran_and_used_agree(live_bot, name)
    table = reply_text(live_bot.command("usage by=recipe"))
    assert "`sft-tiny-ddp`" in table and "1 preflight" in table, table

    validated = reply_text(live_bot.command("run recipe=sft-tiny-ddp --dry-run"))
    assert "validated* by preflight" in validated and name in validated, validated
    started = run_name_in(live_bot.command("run recipe=sft-tiny-ddp"))
    card = reply_text(live_bot.card(live_bot.run_named(started)))
    assert "Validated" in card and name in card, card
    live_bot.command(f"stop {started}")


def test_skipping_a_preflight_is_an_approval_by_other_approvers_audited_and_shown_unvalidated(
    live_bot: LiveBot,
) -> None:
    sent = live_bot.command("run recipe=sft-tiny-ddp batch_size=2 --skip-preflight", user=BOB)
    reply = reply_text(sent)
    assert "is held" in reply and "other approvers" in reply, reply
    name = run_name_in(sent)
    run = live_bot.run_named(name)
    assert run.status == "awaiting_approval" and run.polyaxon_uuid is None
    assert "Held" in reply_text(live_bot.card(run))
    with live_bot.runtime.services.sessions() as s:
        [request] = repos.list_approval_requests(s, run_id=run.id)
    assert request.action == "skip_preflight" and request.message_ts

    def react(user: str) -> None:
        sent = live_bot.sender.reaction(
            "reaction_added", user=user, channel=CHANNEL, ts=str(request.message_ts), reaction=APPROVE
        )
        assert sent.status == 200

    react(BOB)  # the requester: never counts
    react(ALICE)  # not an approver
    wait_for(lambda: "can't approve their own request" in thread_text(live_bot, run), timeout=30)
    wait_for(lambda: "is not an approver" in thread_text(live_bot, run), timeout=30)
    assert live_bot.run_named(name).status == "awaiting_approval"
    react(CAROL)  # another approver: quorum 1, the run goes to Polyaxon
    run = wait_for(lambda: (r := live_bot.run_named(name)).polyaxon_uuid and r, timeout=60, interval=0.5)
    assert run.validation is not None and run.validation["state"] == "unvalidated"
    assert run.validation["skipped_by"] == BOB and run.validation["approved_by"] == [CAROL]
    live_bot.wait_card(run, "Unvalidated", CAROL)
    with live_bot.runtime.services.sessions() as s:
        audit = [a.command for a in repos.list_audit_for_run(s, run_id=run.id or 0)]
        assert repos.get_approval_request(s, request_id=request.id or 0).status == "granted"  # type: ignore[union-attr]
    assert "run recipe=sft-tiny-ddp --skip-preflight" in audit and f"skip preflight of {name}" in audit, audit
    live_bot.command(f"stop {name}", user=BOB)


def test_a_preflight_whose_memory_estimate_cannot_fit_fails_before_submission(live_bot: LiveBot) -> None:
    before = len(live_bot.standin.messages(CHANNEL))
    reply = reply_text(live_bot.command("preflight recipe=sft-tiny-ddp batch_size=64 max_length=1024"))
    assert "failed before submission" in reply and "memory: FAILED" in reply, reply
    assert "communication: not run" in reply, reply
    assert len(live_bot.standin.messages(CHANNEL)) == before  # no card: nothing was submitted


# Slow (~70 s: it waits out the recipe's 30 s rendezvous): the passing preflight above runs by default, and the
# failed communication line's report is tested without a stack in tests/trainer/test_preflight.py.
@pytest.mark.slow
def test_a_preflight_whose_workers_never_join_fails_its_communication_line(live_bot: LiveBot) -> None:
    # ddp-2x8 asks for 2 replicas; the local preflight is one job, so the second node never joins.
    name = run_name_in(live_bot.command("preflight recipe=sft-tiny-ddp preset=ddp-2x8"))
    run = live_bot.wait_status(name, {"succeeded", "failed"}, timeout=600)
    row = wait_for(lambda: (p := preflight_of(live_bot, run)).status != "running" and p, timeout=120, interval=0.5)
    assert row.status == "failed"
    lines = {line["name"]: line for line in (row.report or {}).get("lines", [])}
    assert lines["communication"]["ok"] is False, row.report
    assert "never joined" in lines["communication"]["summary"] or "answered" in lines["communication"]["summary"]
    wait_for(lambda: "Preflight failed" in thread_text(live_bot, run), timeout=60, interval=0.5)


def test_a_skip_request_that_expires_cancels_its_held_run_and_a_cancelled_one_voids_its_request(
    live_bot: LiveBot,
) -> None:
    services = live_bot.runtime.services
    assert services.registry is not None
    held = [
        run_name_in(live_bot.command(f"run recipe=sft-tiny-ddp batch_size={size} --skip-preflight", user=BOB))
        for size in (3, 5)  # batch sizes no preflight validated
    ]
    runs = [live_bot.run_named(name) for name in held]
    with services.sessions() as s:
        requests = [repos.list_approval_requests(s, run_id=run.id)[0] for run in runs]
        # The first request's time is up.
        expired = repos.get_approval_request(s, request_id=requests[0].id or 0)
        assert expired is not None
        repos.update_approval_request(s, expired, expires_at=services.clock() - timedelta(minutes=1))
        s.commit()
    assert services.registry.expire_due() == 1
    first = live_bot.wait_status(held[0], {"skipped"}, timeout=30)
    assert "expired unapproved" in thread_text(live_bot, first) and first.polyaxon_uuid is None
    # The second held run is cancelled by its requester: its request no longer stands for anything.
    live_bot.command(f"stop {held[1]}", user=BOB)
    live_bot.wait_status(held[1], {"stopped"}, timeout=30)
    sent = live_bot.sender.reaction(
        "reaction_added", user=CAROL, channel=CHANNEL, ts=str(requests[1].message_ts), reaction=APPROVE
    )
    assert sent.status == 200
    wait_for(lambda: "voided" in thread_text(live_bot, runs[1]), timeout=30)
    second = live_bot.run_named(held[1])
    assert second.status == "stopped" and second.polyaxon_uuid is None


def test_a_skip_carried_out_again_after_a_crash_posts_its_missing_request_once(live_bot: LiveBot) -> None:
    services = live_bot.runtime.services
    assert services.runs is not None and services.registry is not None
    cmd = parse_command("run recipe=sft-tiny-ddp batch_size=6 --skip-preflight")
    assert isinstance(cmd, RunCommand)
    submitter = services.runs.submitter
    plan = submitter.plan(cmd)
    plan.validation = {"state": "awaiting_approval", "requested_by": BOB}
    # The first attempt died after recording and carding the held run, before posting its request.
    _, run = submitter.start_command(plan, cmd, user=BOB, channel=CHANNEL, delivery_key="crashed-delivery", hold=True)
    assert run is not None and run.status == "awaiting_approval"
    for _ in range(2):  # the ledger's recovery carries the delivery out again (and once more changes nothing)
        services.registry.skip_preflight(cmd, user=BOB, channel=CHANNEL, delivery_key="crashed-delivery")
    with services.sessions() as s:
        requests = repos.list_approval_requests(s, run_id=run.id, action="skip_preflight")
    assert len(requests) == 1 and requests[0].status == "open"
    live_bot.command(f"stop {run.name}", user=BOB)
