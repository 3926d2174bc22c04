"""What the deployment cannot run, through the front door on the real local Polyaxon: the local stack has no
training operator, so a `pytorchjob` is refused up front with the way forward (and the dry run warns), while its
preflight still runs here; and where the bot is not told so, the converter's refusal is quoted on the card's
thread instead of "no log lines".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]

CAROL = "U0CAROL01"  # a second approver
APPROVE = "white_check_mark"
WAY_FORWARD = (
    "the preflight runs here: `/finetune preflight recipe=sft-tiny-ddp preset=ddp-cpu-2`; "
    "the run needs a cluster with the training operator"
)


@pytest.fixture(scope="module")
def local_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """A bot told what the local stack cannot run, as `finetune-bot local` tells it."""
    folder = tmp_path_factory.mktemp("capability")
    with start_live_bot(
        polyaxon_stack, folder, approvers=[BOB, CAROL], finetune={"unsupported_run_kinds": ["pytorchjob"]}
    ) as bot:
        yield bot


@pytest.fixture(scope="module")
def untold_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """A bot that does not know what its Polyaxon cannot run: only the converter finds out."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("untold"), approvers=[BOB, CAROL]) as bot:
        yield bot


def run_count(bot: LiveBot) -> int:
    with bot.runtime.services.sessions() as s:
        return len(repos.list_recent_runs(s, limit=500))


def test_a_distributed_run_is_refused_up_front_with_the_way_forward_and_its_preflight_still_runs(
    local_bot: LiveBot,
) -> None:
    dry = reply_text(local_bot.command("run recipe=sft-tiny-ddp --dry-run"))
    warnings = dry.split("*Warnings*", 1)[1]
    assert "`run` is refused here" in warnings and WAY_FORWARD in warnings, dry
    assert "FINETUNE_UNSUPPORTED_RUN_KINDS" in warnings and "none" not in warnings.split("\n")[1:2], dry

    messages, runs = len(local_bot.standin.messages(CHANNEL)), run_count(local_bot)
    for text, user in (
        ("run recipe=sft-tiny-ddp", ALICE),
        ("run recipe=sft-tiny-ddp batch_size=2 --skip-preflight", BOB),
    ):
        refused = reply_text(local_bot.command(text, user=user))
        assert "`sft-tiny-ddp` is a distributed run and this deployment cannot run `pytorchjob`" in refused, refused
        assert "needs a cluster with the training operator" in refused and "/finetune preflight" in refused, refused
    # Refused before anything was recorded, carded or held.
    assert len(local_bot.standin.messages(CHANNEL)) == messages and run_count(local_bot) == runs

    # A single-process recipe is untouched, and the distributed recipe's preflight (one local job) is submitted.
    plain = reply_text(local_bot.command("run recipe=sft-tiny --dry-run"))
    assert "refused here" not in plain, plain
    name = run_name_in(local_bot.command("preflight recipe=sft-tiny-ddp"))
    preflight = local_bot.run_named(name)
    assert preflight.kind == "preflight" and preflight.polyaxon_uuid, preflight
    started = local_bot.wait_status(name, {"running", "succeeded", "failed"}, timeout=120)
    assert started.status != "failed", local_bot.thread(started)
    local_bot.command(f"stop {name}")


def test_a_run_the_converter_refuses_quotes_the_condition_not_no_log_lines(untold_bot: LiveBot) -> None:
    # An approver skips the preflight and another approves: the pytorchjob reaches Polyaxon's agent.
    sent = untold_bot.command("run recipe=sft-tiny-ddp batch_size=2 --skip-preflight", user=BOB)
    name = run_name_in(sent)
    run = untold_bot.run_named(name)
    with untold_bot.runtime.services.sessions() as s:
        [request] = repos.list_approval_requests(s, run_id=run.id)
    reacted = untold_bot.sender.reaction(
        "reaction_added", user=CAROL, channel=CHANNEL, ts=str(request.message_ts), reaction=APPROVE
    )
    assert reacted.status == 200

    failed = untold_bot.wait_status(name, {"failed", "succeeded"}, timeout=120)
    assert failed.status == "failed" and failed.failure is not None, failed
    assert failed.failure["kind"] == "unsupported", failed.failure
    post = wait_for(
        lambda: next((t for t in untold_bot.thread(failed) if ":x: *failed*" in t), None), timeout=30, interval=0.5
    )
    assert "Specification with run kind: pytorchjob is not supported in this deployment version" in post, post
    assert "AgentLogger" in post and "training operator" in post, post
    assert "no log lines" not in post.lower() and "attached" not in post, post
    assert not [f for f in untold_bot.standin.files() if name in str(f.get("name"))]
