"""What the bot claims must be right: presets, memory, compare, cards, resume, retention, reactions, digests.

Each case is driven through the front door (signed slash commands and reaction events) against the real local
Polyaxon stack, real TRL training and the Slack stand-in.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

CAROL = "U0CAROL01"  # neither the requester nor an approver
OVER_BUDGET = "run recipe=sft-tiny batch_size=64 max_length=1024 max_steps=2 save_steps=1"


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """One bot for this module (BOB approves)."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("trust"), approvers=[BOB]) as bot:
        yield bot


@pytest.fixture(scope="module")
def finished(live_bot: LiveBot) -> tuple[Run, Run]:
    """Two succeeded sft-tiny runs that differ in their learning rate, trained side by side."""
    names = [
        run_name_in(live_bot.command(f"run recipe=sft-tiny lr={lr} max_steps=20 save_steps=10"))
        for lr in ("3e-3", "1e-3")
    ]
    first, second = (live_bot.wait_status(name, {"succeeded"}, timeout=300) for name in names)
    return first, second


@pytest.fixture(scope="module")
def stopped(live_bot: LiveBot) -> Run:
    """An sft-tiny run stopped after its checkpoints at steps 5 and 10."""
    name = run_name_in(live_bot.command("run recipe=sft-tiny max_steps=200 save_steps=5 logging_steps=1"))
    wait_for(lambda: (live_bot.run_named(name).checkpoint_step or 0) >= 10, timeout=300, interval=0.5)
    assert "Stopping" in reply_text(live_bot.command(f"stop {name}"))
    return live_bot.wait_status(name, {"stopped"}, timeout=120)


def thread_of(bot: LiveBot, run: Run) -> str:
    """The run's thread as one text (the card may have been replaced: read the run again)."""
    return "\n".join(bot.thread(bot.run_named(run.name)))


def blocks_text(message: dict[str, Any]) -> str:
    """A message's text and the texts of its blocks, one per line."""
    return reply_text(message)


# --- presets and the memory estimate ------------------------------------------------------------


def test_a_placement_preset_stacks_on_the_recipes_resources_and_two_of_one_family_conflict(live_bot: LiveBot) -> None:
    stacked = reply_text(live_bot.command("run recipe=sft-llama31-8b-lora preset=spot --dry-run"))
    assert "GPUs: 1" in stacked and "gpu-1x" in stacked and "spot" in stacked, stacked
    assert "recipe default" in stacked, stacked  # which preset set each field
    both = reply_text(live_bot.command("run recipe=sft-llama31-8b-lora preset=gpu-1x,gpu-8x"))
    assert "gpu-1x and gpu-8x both set resources" in both, both
    lost = reply_text(live_bot.command("run recipe=sft-llama31-8b-lora preset=cpu-small --dry-run"))
    assert "NO GPU" in lost, lost


def test_over_the_memory_estimate_is_refused_unless_an_approver_forces_it(live_bot: LiveBot) -> None:
    before = len(live_bot.standin.messages(CHANNEL))
    refused = reply_text(live_bot.command(OVER_BUDGET))
    assert "OVER BUDGET" in refused and "preset=cpu-large" in refused and "--force" in refused, refused
    not_approver = reply_text(live_bot.command(f"{OVER_BUDGET} --force"))
    assert "only an approver" in not_approver, not_approver
    time.sleep(1)
    assert len(live_bot.standin.messages(CHANNEL)) == before, "nothing was submitted"

    name = run_name_in(live_bot.command(f"{OVER_BUDGET} --force", user=BOB))
    run = live_bot.wait_status(name, {"succeeded", "failed"}, timeout=300)
    assert any("--force" in t and f"<@{BOB}>" in t for t in live_bot.thread(run)), live_bot.thread(run)
    with live_bot.runtime.services.sessions() as s:
        audit = [e for e in repos.list_audit_for_run(s, run_id=run.id or 0) if e.command.endswith("--force")]
    assert audit and audit[0].user == BOB and "memory estimate" in (audit[0].detail or "")


# --- cards and compare ----------------------------------------------------------------------------


def test_cards_show_overrides_presets_and_pins_by_their_identifying_part(
    live_bot: LiveBot, finished: tuple[Run, Run]
) -> None:
    first, second = (blocks_text(live_bot.card(run)) for run in finished)
    assert "`lr=0.003`" in first and "`lr=0.001`" in second and "`max_steps=20`" in first, first
    assert "cpu-small" in first
    assert "tiny-llama@sha256:" in first and "trainer@sha256:" in first, first
    assert "ghcr.io/fine" not in first and ".finetune/mo" not in first
    assert first.replace("0.003", "") != second.replace("0.001", "")


def test_compare_ranks_final_evals_of_finished_runs_only_and_shows_what_differs(
    live_bot: LiveBot, finished: tuple[Run, Run], stopped: Run
) -> None:
    first, second = finished
    reply = reply_text(live_bot.command(f"compare {first.name} {second.name} {stopped.name}"))
    assert "Posted the comparison" in reply, reply
    table = wait_for(
        lambda: [m for m in live_bot.standin.replies(CHANNEL, first.card_ts or "") if "Comparison" in str(m["text"])]
    )[-1]
    text = blocks_text(table)
    lines = {name: next(line for line in text.split("\n") if name in line) for name in (first.name, stopped.name)}
    assert "eval_perplexity `" in lines[first.name], lines  # the contract's metric from the final evaluation
    assert "learning_rate=0.003" in lines[first.name], lines  # the hyperparameter that differs, as a column
    assert "partial: not ranked" in lines[stopped.name] and ":trophy:" not in lines[stopped.name], lines
    assert text.count(":trophy:") == 1
    # One source of a stopped run's figures: its card, read again when it ended, says what `compare` says, and
    # its step is not behind the checkpoint its stop post names.
    ended = live_bot.run_named(stopped.name)
    card = blocks_text(live_bot.card(ended))
    assert f"step {ended.last_step}/200" in card and (ended.last_step or 0) >= (ended.checkpoint_step or 0), card
    for metric, value in ended.last_metrics.items():  # ` eval_loss `…``: the name whole (not `loss` in it)
        if f" {metric} `" in lines[stopped.name] and isinstance(value, float):
            assert f" {metric} `{value:.4g}`" in lines[stopped.name], (metric, value, lines)
            assert f" {metric} `{value:.4g}`" in card, (metric, value, card)

    alone = reply_text(live_bot.command(f"compare {second.name}"))
    assert "Posted the comparison" in alone
    peers = wait_for(
        lambda: [m for m in live_bot.standin.replies(CHANNEL, second.card_ts or "") if "Comparison" in str(m["text"])]
    )[-1]
    assert "newest finished run" in blocks_text(peers) and first.name in blocks_text(peers)


# --- resume and retention -------------------------------------------------------------------------


def test_resume_loads_one_checkpoint_says_which_and_copies_only_that_one(
    live_bot: LiveBot, stopped: Run, polyaxon_stack: LocalPolyaxonStack
) -> None:
    assert stopped.checkpoint_step is not None and stopped.checkpoint_step >= 10
    step = stopped.checkpoint_step
    resumed = reply_text(live_bot.command(f"resume {stopped.name} max_steps=150"))
    child_name = run_name_in({"text": resumed.split("as", 1)[-1]})
    child = live_bot.wait_status(child_name, {"running", "succeeded"}, timeout=180)
    told = wait_for(lambda: [t for t in live_bot.thread(child) if "Resumed from" in t], timeout=120)
    assert f"`checkpoint-{step}` (step {step}/150)" in told[0], told
    # A shorter schedule than the parent's 200 steps is told as what it is.
    assert any("schedule shortened from 200 to 150 steps" in t for t in live_bot.thread(child)), live_bot.thread(child)
    assert sum("Resumed from" in t for t in live_bot.thread(child)) == 1
    outputs = Path(polyaxon_stack.store) / (child.polyaxon_uuid or "") / "outputs"
    # The run's folder in the store is a mirror of its context folder, synced every few seconds while it runs: a
    # run that starts fast can tell its resume before the first sync has copied the checkpoint there.
    copied = wait_for(lambda: (names := {p.name for p in outputs.glob("checkpoint-*")}) and names, timeout=60)
    # Only the chosen checkpoint was copied in: nothing older is there. (The child keeps training and rotating its
    # own checkpoints, so by the first mirror the copied one may already be rotated out.)
    assert min(int(name.removeprefix("checkpoint-")) for name in copied) >= step, copied
    live_bot.command(f"stop {child_name}")
    live_bot.wait_status(child_name, {"stopped", "succeeded"}, timeout=120)


def test_a_succeeded_run_resumes_only_with_a_longer_schedule(live_bot: LiveBot, finished: tuple[Run, Run]) -> None:
    first = finished[0]
    refused = reply_text(live_bot.command(f"resume {first.name}"))
    assert "succeeded" in refused and f"resume {first.name} max_steps=" in refused, refused
    extended = reply_text(live_bot.command(f"resume {first.name} max_steps=30"))
    child = live_bot.wait_status(run_name_in({"text": extended.split("as", 1)[-1]}), {"succeeded"}, timeout=300)
    told = wait_for(lambda: [t for t in live_bot.thread(child) if "Resumed from" in t], timeout=60)
    assert "`checkpoint-20` (step 20/30)" in told[0], told
    assert any("schedule extended from 20 to 30 steps" in t for t in live_bot.thread(child)), live_bot.thread(child)
    assert child.last_step == 30


def test_a_run_without_a_complete_checkpoint_is_not_offered_a_resume(live_bot: LiveBot) -> None:
    # A stopped run saves a checkpoint on its way out; one that fails before training has none (a GPU recipe
    # on this CPU-only host fails on its bf16 setup inside the job).
    name = run_name_in(live_bot.command("run recipe=sft-qwen-0p5b-lora max_steps=1"))
    run = live_bot.wait_status(name, {"failed"}, timeout=240)
    assert "can't be resumed" in thread_of(live_bot, run), thread_of(live_bot, run)
    assert "Resume" not in str(live_bot.card(run).get("blocks"))
    refused = reply_text(live_bot.command(f"resume {name}"))
    assert "no complete checkpoint" in refused and "/finetune run recipe=sft-qwen-0p5b-lora" in refused, refused
    smuggled = reply_text(live_bot.command("run recipe=sft-tiny resume_from=../../../etc/passwd"))
    assert "resume_from" in smuggled and "/finetune resume" in smuggled, smuggled


# --- approvals, a card that is gone, digests -------------------------------------------------------


def test_reactions_on_a_card_without_request_and_on_a_registered_request_are_answered(
    live_bot: LiveBot, finished: tuple[Run, Run]
) -> None:
    first = finished[0]
    live_bot.standin.react_as_user(CAROL, CHANNEL, first.card_ts or "", "white_check_mark")
    live_bot.sender.reaction(
        "reaction_added", user=CAROL, channel=CHANNEL, ts=first.card_ts or "", reaction="white_check_mark"
    )
    told = wait_for(lambda: [e for e in live_bot.standin.ephemerals(CHANNEL, CAROL) if "no open approval" in str(e)])
    assert first.name in str(told[0])

    reply = reply_text(live_bot.command(f"register {first.name} model=trust-tiny"))
    assert "approval request" in reply, reply
    with live_bot.runtime.services.sessions() as s:
        [request] = repos.list_approval_requests(s, model="trust-tiny")
    for user in (BOB, CAROL):
        live_bot.standin.react_as_user(user, CHANNEL, request.message_ts or "", "white_check_mark")
        live_bot.sender.reaction(
            "reaction_added", user=user, channel=CHANNEL, ts=request.message_ts or "", reaction="white_check_mark"
        )
        if user == BOB:
            wait_for(lambda: "Registered *trust-tiny:v1*" in thread_of(live_bot, first), timeout=60)
    wait_for(lambda: "is registered already" in thread_of(live_bot, first), timeout=30)


def test_a_card_that_is_gone_is_posted_again_and_the_command_still_answers(
    live_bot: LiveBot, finished: tuple[Run, Run]
) -> None:
    second = live_bot.run_named(finished[1].name)
    old_card = second.card_ts or ""
    live_bot.standin.delete_message(CHANNEL, old_card)
    reply = reply_text(live_bot.command(f"logs {second.name} lines=5"))
    assert "log lines" in reply and "went wrong" not in reply, reply
    fresh = wait_for(lambda: (r := live_bot.run_named(second.name)).card_ts != old_card and r)
    thread = "\n".join(live_bot.thread(fresh))
    assert "earlier card is gone" in thread and "log lines of" in thread, thread
    assert second.name in blocks_text(live_bot.card(fresh))


def test_the_digest_shows_running_runs_and_new_registrations_and_says_what_a_schedule_replaces(
    live_bot: LiveBot, finished: tuple[Run, Run]
) -> None:
    name = run_name_in(live_bot.command("run recipe=sft-tiny max_steps=400 save_steps=400 logging_steps=1"))
    wait_for(lambda: live_bot.run_named(name).status == "running", timeout=240, interval=0.5)
    assert "Posted the digest" in reply_text(live_bot.command("digest now"))
    digest = wait_for(lambda: [m for m in live_bot.standin.messages(CHANNEL) if "Training digest" in str(m)])[-1]
    text = blocks_text(digest)
    assert "In progress" in text and name in text, text
    assert "Registered" in text and "trust-tiny:v1" in text, text
    live_bot.command(f"stop {name}")
    assert "Digest scheduled daily" in reply_text(live_bot.command("digest daily 09:00"))
    weekly = reply_text(live_bot.command("digest weekly mon 09:00"))
    assert "replaces the channel's daily at 09:00 (UTC) digest" in weekly, weekly
    live_bot.command("digest off")
    live_bot.wait_status(name, {"stopped", "succeeded"}, timeout=120)
    assert ALICE
