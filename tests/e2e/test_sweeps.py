"""Sweeps end to end: signed slash commands -> one Polyaxon matrix on the real local server -> trials run by the agent
-> one card and one leaderboard edited in place in the stand-in.

The shipped catalog's `quickstart` (seconds per trial on CPU) is swept; a test catalog adds a recipe whose
learning rate may be negative (SGD refuses it: a trial that fails fast) and one with an eval target.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Run, Sweep
from tests.e2e.conftest import ALICE, BOB, CHANNEL, REPO, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for
from tests.manifests.catalog_repo import copy_manifests

pytestmark = [pytest.mark.polyaxon]

SWEEP = "sweep recipe=quickstart lr=0.01,0.05,0.1 concurrency=2"


@pytest.fixture(scope="module")
def live_bot(polyaxon_stack: LocalPolyaxonStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBot]:
    """One bot for this module, on the shipped catalog."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("sweeps")) as bot:
        yield bot


def sweep_of(bot: LiveBot, name: str) -> tuple[Run, Sweep, list[Run]]:
    """The sweep's run, its record and its trials."""
    with bot.runtime.services.sessions() as s:
        run = repos.get_run_by_name(s, name=name)
        assert run is not None, name
        sweep = repos.get_sweep(s, run_id=run.id or 0)
        assert sweep is not None
        trials = list(repos.sweep_trials(s, sweep_run_id=run.id or 0))
    return run, sweep, trials


def confirm_a_run(bot: LiveBot, text: str) -> str:
    """Run once, wait for success, read its outputs back: the smoke-first gate's evidence."""
    name = run_name_in(bot.command(text))
    bot.wait_status(name, {"succeeded"}, timeout=180)
    reply = reply_text(bot.command(f"outputs {name}"))
    assert "confirmed :white_check_mark:" in reply, reply
    return name


def sweep_calls(bot: LiveBot, run: Run, leaderboard_ts: str | None) -> dict[str, int]:
    """Slack Web API calls about this sweep: card posts and edits, thread posts, leaderboard edits, uploads."""
    posts = bot.standin.calls("chat.postMessage")
    updates = bot.standin.calls("chat.update")
    return {
        "card posts": sum(1 for a in posts if not a.get("thread_ts") and run.name in str(a.get("text") or "")),
        "thread posts": sum(1 for a in posts if a.get("thread_ts") == run.card_ts),
        "card edits": sum(1 for a in updates if a.get("ts") == run.card_ts),
        "leaderboard edits": sum(1 for a in updates if a.get("ts") == leaderboard_ts),
        "uploads": sum(
            1 for a in bot.standin.calls("files.completeUploadExternal") if a.get("thread_ts") == run.card_ts
        ),
    }


def test_a_sweep_is_refused_until_a_run_of_its_pins_is_confirmed_and_bad_values_change_nothing(
    live_bot: LiveBot,
) -> None:
    before = len(live_bot.standin.messages(CHANNEL))
    refused = reply_text(live_bot.command(SWEEP))
    assert "confirmed run" in refused and "/finetune run recipe=quickstart" in refused, refused
    assert "/finetune outputs" in refused
    out_of_bounds = reply_text(live_bot.command("sweep recipe=quickstart lr=0.01,2"))
    assert "lr=2" in out_of_bounds and "out of bounds" in out_of_bounds and "(0, 1]" in out_of_bounds
    not_a_range = reply_text(live_bot.command("sweep recipe=quickstart epochs=uniform(1,5) trials=2"))
    assert "list its values instead" in not_a_range
    cluster = reply_text(live_bot.command("sweep recipe=quickstart lr=0.01,0.1 gpus=1"))
    assert "cluster setting" in cluster
    typo = reply_text(live_bot.command("sweep recipe=quickstart lrr=0.01,0.1"))
    assert "did you mean lr" in typo
    assert len(live_bot.standin.messages(CHANNEL)) == before  # nothing posted, nothing submitted
    with live_bot.runtime.services.sessions() as s:
        assert [r for r in repos.list_recent_runs(s, limit=50) if r.kind == "sweep"] == []


def test_a_grid_runs_as_one_matrix_to_one_card_and_one_leaderboard_ranked_on_accuracy(live_bot: LiveBot) -> None:
    confirm_a_run(live_bot, "run recipe=quickstart epochs=2")
    dry = reply_text(live_bot.command(SWEEP + " --dry-run"))
    assert "3 trials" in dry and '"kind": "grid"' in dry and "It would be submitted now" in dry
    top_level_before = len(live_bot.standin.messages(CHANNEL))
    name = run_name_in(live_bot.command(SWEEP))
    assert name.startswith("quickstart-sweep-")
    run = live_bot.wait_status(name, {"succeeded"}, timeout=300)
    run, sweep, trials = wait_for(
        lambda: (got := sweep_of(live_bot, name))[1].summary_ts is not None and got, timeout=60, interval=0.5
    )
    # One matrix in Polyaxon, three trials it created; one card in the channel.
    gateway = live_bot.runtime.services.gateway
    matrix = gateway.get_run(run.polyaxon_uuid or "", with_conditions=False)
    assert matrix.status == "succeeded"
    assert len(gateway.list_children(run.polyaxon_uuid or "")) == 3
    assert [t.status for t in trials] == ["succeeded"] * 3
    assert sorted(t.params["lr"] for t in trials) == [0.01, 0.05, 0.1]
    assert len(live_bot.standin.messages(CHANNEL)) == top_level_before + 1
    # The leaderboard: one message in the thread, edited in place, ranking all three by accuracy.
    replies = live_bot.standin.replies(CHANNEL, run.card_ts or "")
    boards = [m for m in replies if str(m.get("text", "")).startswith("Leaderboard of")]
    assert len(boards) == 1 and boards[0]["ts"] == sweep.leaderboard_ts
    board = reply_text(live_bot.standin.message(CHANNEL, sweep.leaderboard_ts or ""))
    accuracies = {t.name: float(t.last_metrics["accuracy"]) for t in trials}
    best = max(accuracies, key=lambda n: (accuracies[n], -int(n.rsplit("-t", 1)[1])))
    assert f":trophy: #1 `{best}`" in board and "#3" in board and "accuracy" in board
    assert board.index("#1") < board.index("#2") < board.index("#3")
    # The card: mode, space, counts, best so far and its buttons.
    card = reply_text(live_bot.card(run))
    assert "grid over lr" in card and "3/3 done" in card and f"`{best}`" in card
    buttons = [e["value"] for b in live_bot.card(run)["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == [f"compare-top:{name}"]
    # The final summary mentions the requester, and the plot of accuracy against lr is attached.
    summary = reply_text(live_bot.standin.message(CHANNEL, sweep.summary_ts or ""))
    assert f"<@{ALICE}>" in summary and f"`{best}`" in summary
    assert any(f["name"] == f"{name}-space.png" for f in live_bot.standin.files())
    # Slack calls: one card, the leaderboard posted once and edited as trials move, no post per trial.
    calls = sweep_calls(live_bot, run, sweep.leaderboard_ts)
    print(f"\nSlack calls for the 3-trial sweep: {calls}; thread: {[str(m.get('text'))[:40] for m in replies]}")
    assert calls["card posts"] == 1 and calls["uploads"] == 1
    thread_texts = [str(m.get("text") or "") for m in replies if not m.get("files")]
    assert calls["thread posts"] == len(thread_texts) <= 6  # submitted, leaderboard, running, succeeded, summary
    assert sum(1 for t in thread_texts if "Trial" in t or "trial `" in t) == 0
    assert 1 <= calls["leaderboard edits"] <= 3 * 7  # at most one per trial state change
    # Whole-sweep commands.
    status = reply_text(live_bot.command(f"status {name}"))
    assert "Leaderboard" in status and "3/3 done" in status
    compared = reply_text(live_bot.command(f"compare {name} top=2"))
    assert "Posted the comparison" in compared
    refused = reply_text(live_bot.command(f"register {name} model=qs"))
    assert "is a sweep" in refused and f"/finetune register {best}" in refused
    register = reply_text(live_bot.command(f"register {best} model=qs-sweep", user=ALICE))
    assert "approval request" in register and f"for `qs-sweep` in the thread of `{best}`" in register, register
    request = wait_for(
        lambda: next(
            (m for m in live_bot.standin.replies(CHANNEL, run.card_ts or "") if "qs-sweep" in reply_text(m)), None
        ),
        timeout=30,
    )
    assert request["thread_ts"] == run.card_ts  # a trial's posts go in its sweep's thread
    # The digest: the sweep is one line with its best trial; its trials have no line of their own.
    live_bot.command("digest now")
    digest = wait_for(
        lambda: next(
            (reply_text(m) for m in live_bot.standin.messages(CHANNEL) if "Training digest" in reply_text(m)), None
        ),
        timeout=30,
    )
    assert f"sweep: 3/3 trials done, 0 failed · best `{best}`" in digest, digest
    # (the best trial is named again only by the registration request that waits for a decision)
    assert all(t.name not in digest for t in trials if t.name != best), digest


def test_a_random_sweep_with_a_seed_samples_the_same_trials_and_stops_mid_sweep(live_bot: LiveBot) -> None:
    if not any(r.status == "succeeded" for r in _train_runs(live_bot)):
        confirm_a_run(live_bot, "run recipe=quickstart epochs=2")
    space = "lr=loguniform(0.01,0.1) hidden=8,16,32 mode=random trials=3 sampler_seed=11"
    quick = run_name_in(live_bot.command(f"sweep recipe=quickstart {space} epochs=1 concurrency=3"))
    slow = run_name_in(live_bot.command(f"sweep recipe=quickstart {space} epochs=50 concurrency=1"))
    _, _, quick_trials = wait_for(lambda: len((got := sweep_of(live_bot, quick))[2]) == 3 and got, timeout=120)
    _, _, slow_trials = wait_for(lambda: len((got := sweep_of(live_bot, slow))[2]) == 3 and got, timeout=120)
    sampled = [(t.params["lr"], t.params["hidden"]) for t in quick_trials]
    assert sampled == [(t.params["lr"], t.params["hidden"]) for t in slow_trials]
    assert all(0.01 <= lr <= 0.1 for lr, _ in sampled), sampled  # loguniform's ends, not their exponents
    assert len({round(math.log(lr), 6) for lr, _ in sampled}) == 3
    # Stop the slow one while its first trial runs: the matrix and every trial end, the card says who.
    wait_for(lambda: any(t.status == "running" for t in sweep_of(live_bot, slow)[2]), timeout=120)
    not_yours = reply_text(live_bot.command(f"stop {slow}", user="U0EVE0001"))
    assert "can stop" in not_yours
    stopping = reply_text(live_bot.command(f"stop {slow}"))
    assert "Stopping sweep" in stopping
    run = live_bot.wait_status(slow, {"stopped"}, timeout=120)
    _, sweep, trials = wait_for(
        lambda: (got := sweep_of(live_bot, slow))[1].summary_ts is not None and got, timeout=90, interval=0.5
    )
    assert all(t.status == "stopped" for t in trials), [t.status for t in trials]
    assert sweep.stop_reason == f"stopped by <@{ALICE}>"
    card = reply_text(live_bot.card(run))
    assert "stopped by" in card and "Stop sweep" not in str(live_bot.card(run)["blocks"])
    live_bot.wait_status(quick, {"succeeded"}, timeout=240)


def _train_runs(bot: LiveBot) -> list[Run]:
    with bot.runtime.services.sessions() as s:
        return [r for r in repos.list_recent_runs(s, limit=100) if r.kind == "train"]


# --- a test catalog: a trial that fails, a recipe with a target ------------------------------------------


def _test_catalog(root: Path) -> Path:
    """The shipped catalog plus `quickstart-flaky` (lr may be negative) and `quickstart-target` (accuracy 0.5)."""
    catalog = root / "manifests"
    copy_manifests(catalog)
    recipe: dict[str, Any] = yaml.safe_load((REPO / "manifests/recipes/quickstart.yaml").read_text())
    flaky = {**recipe, "name": "quickstart-flaky", "description": "Quick start; lr below 0 fails the trial."}
    flaky["overrides"] = {**recipe["overrides"], "lr": {"type": "float in [-1, 1]"}}
    (catalog / "recipes/quickstart-flaky.yaml").write_text(yaml.safe_dump(flaky))
    target = {**recipe, "name": "quickstart-target", "description": "Quick start that stops a sweep at 50%."}
    target["eval"] = {**recipe["eval"], "target": 0.5}
    (catalog / "recipes/quickstart-target.yaml").write_text(yaml.safe_dump(target))
    return catalog


@pytest.fixture(scope="module")
def test_catalog_bot(polyaxon_stack: LocalPolyaxonStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBot]:
    folder = tmp_path_factory.mktemp("sweeps-catalog")
    with start_live_bot(polyaxon_stack, folder, catalog_dir=_test_catalog(folder), approvers=[BOB]) as bot:
        yield bot


def test_three_failed_trials_in_a_row_stop_the_sweep_with_the_first_cause_in_the_thread(
    test_catalog_bot: LiveBot,
) -> None:
    bot = test_catalog_bot
    confirm_a_run(bot, "run recipe=quickstart-flaky epochs=1")
    name = run_name_in(bot.command("sweep recipe=quickstart-flaky lr=-1,-0.5,-0.2,0.05,0.1 epochs=1 concurrency=1"))
    run = bot.wait_status(name, {"stopped", "failed"}, timeout=240)
    _, sweep, trials = wait_for(
        lambda: (got := sweep_of(bot, name))[1].summary_ts is not None and got, timeout=90, interval=0.5
    )
    assert [t.status for t in trials[:3]] == ["failed"] * 3
    assert all(t.status in ("stopped", "failed") for t in trials[3:]), [t.status for t in trials]
    assert sweep.stop_reason is not None and "3 trials failed in a row" in sweep.stop_reason
    thread = "\n".join(reply_text(m) for m in bot.standin.replies(CHANNEL, run.card_ts or ""))
    assert f"Trial `{trials[0].name}`" in thread and "first failure" in thread
    assert "Invalid learning rate" in thread  # the cause, from the failed trial's log tail
    assert thread.count("the sweep's first failure") == 1


@pytest.mark.slow  # the decision and the matrix's earlyStopping are unit-tested (tests/bot/sweeps, tests/bot/catalog)
def test_a_trial_reaching_the_recipes_target_ends_the_sweep_early(test_catalog_bot: LiveBot) -> None:
    bot = test_catalog_bot
    confirm_a_run(bot, "run recipe=quickstart-target epochs=1")
    name = run_name_in(bot.command("sweep recipe=quickstart-target lr=0.05,0.1,0.2 epochs=1 concurrency=1"))
    bot.wait_status(name, {"stopped", "succeeded"}, timeout=240)
    _, sweep, trials = wait_for(
        lambda: (got := sweep_of(bot, name))[1].summary_ts is not None and got, timeout=90, interval=0.5
    )
    assert trials[0].status == "succeeded"
    assert [t.status for t in trials[1:]] == ["stopped", "stopped"], [t.status for t in trials]
    assert sweep.stop_reason is not None and "reached the target" in sweep.stop_reason
    summary = reply_text(bot.standin.message(CHANNEL, sweep.summary_ts or ""))
    assert "It stopped early" in summary and f"`{trials[0].name}`" in summary
