"""From one job to many: output retrieval, the smoke-first gate and the distributed preflight, end to end.

Driven through the front door (signed slash commands) against the real local Polyaxon stack, real TRL
training (under torchrun with gloo for the preflight) and the Slack stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Preflight, Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """One bot for this module (BOB approves)."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("preflight"), approvers=[BOB]) as bot:
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
    thread = thread_text(live_bot, run)
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

    validated = reply_text(live_bot.command("run recipe=sft-tiny-ddp --dry-run"))
    assert "validated* by preflight" in validated and name in validated, validated
    started = run_name_in(live_bot.command("run recipe=sft-tiny-ddp"))
    card = reply_text(live_bot.card(live_bot.run_named(started)))
    assert "Validated" in card and name in card, card
    live_bot.command(f"stop {started}")


def test_an_approver_may_skip_the_preflight_audited_and_shown_unvalidated(live_bot: LiveBot) -> None:
    name = run_name_in(live_bot.command("run recipe=sft-tiny-ddp batch_size=2 --skip-preflight", user=BOB))
    run = live_bot.run_named(name)
    assert run.validation == {"state": "unvalidated", "skipped_by": BOB}
    assert "Unvalidated" in reply_text(live_bot.card(run))
    with live_bot.runtime.services.sessions() as s:
        audit = [a.command for a in repos.list_audit_for_run(s, run_id=run.id or 0)]
    assert "run recipe=sft-tiny-ddp --skip-preflight" in audit, audit
    live_bot.command(f"stop {name}", user=BOB)


def test_a_preflight_whose_memory_estimate_cannot_fit_fails_before_submission(live_bot: LiveBot) -> None:
    before = len(live_bot.standin.messages(CHANNEL))
    reply = reply_text(live_bot.command("preflight recipe=sft-tiny-ddp batch_size=64 max_length=1024"))
    assert "failed before submission" in reply and "memory: FAILED" in reply, reply
    assert "communication: not run" in reply, reply
    assert len(live_bot.standin.messages(CHANNEL)) == before  # no card: nothing was submitted


def test_a_preflight_whose_workers_never_join_fails_its_communication_line(live_bot: LiveBot) -> None:
    # ddp-2x8 asks for 2 replicas; the local preflight is one job, so the second node never joins.
    name = run_name_in(live_bot.command("preflight recipe=sft-tiny-ddp preset=ddp-2x8"))
    run = live_bot.wait_status(name, {"succeeded", "failed"}, timeout=600)
    row = wait_for(lambda: (p := preflight_of(live_bot, run)).status != "running" and p, timeout=120, interval=0.5)
    assert row.status == "failed"
    lines = {line["name"]: line for line in (row.report or {}).get("lines", [])}
    assert lines["communication"]["ok"] is False, row.report
    assert "never joined" in lines["communication"]["summary"] or "answered" in lines["communication"]["summary"]
    assert "Preflight failed" in thread_text(live_bot, run)
