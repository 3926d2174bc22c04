"""A sweep's leaderboard, its stop rules and its card: ranking by final evaluations only, pure rendering."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.sweeps.board import (
    TrialRow,
    best,
    board_digest,
    count,
    leaderboard_csv,
    ranked,
    render_leaderboard,
    trial_rows,
)
from bot.sweeps.card import render_summary, render_sweep_card, space_text, stop_rules
from bot.sweeps.decide import cutoff_reached, failure_streak, target_reached
from storage.models import Run, Sweep

CONTRACT = "sha256:" + "c" * 64
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
SPACE = [{"key": "lr", "input": "lr", "kind": "choice", "values": [0.01, 0.1]}]


def make_sweep(trials: int = 4, *, higher: bool = True, **fields: Any) -> Sweep:
    """A grid sweep over lr, ranked by accuracy."""
    values: dict[str, Any] = {
        "run_id": 1,
        "mode": "grid",
        "space": SPACE,
        "trials": trials,
        "concurrency": 2,
        "metric": "accuracy",
        "higher_is_better": higher,
    }
    values.update(fields)
    return Sweep(**values)


def trial(
    index: int,
    status: str = "succeeded",
    metric: float | None = None,
    *,
    final: bool = True,
    finished: int | None = None,
    lr: float = 0.01,
) -> Run:
    """Trial `index`; `final` marks its metrics with the contract's hash, `finished` is minutes after T0."""
    metrics: dict[str, Any] = {}
    if metric is not None:
        metrics["accuracy"] = metric
        if final:
            metrics["eval_contract_hash"] = CONTRACT
    return Run(
        name=f"sweep-1-trial-{index}",
        recipe_name="quickstart",
        recipe_hash="sha256:" + "r" * 64,
        requester="U123",
        channel="C1",
        status=status,
        params={"lr": lr, "epochs": 5},
        last_metrics=metrics,
        finished_at=T0 + timedelta(minutes=finished) if finished is not None else None,
    )


def sweep_run(status: str = "running", **fields: Any) -> Run:
    """The sweep's own run (kind "sweep"), whose card is rendered."""
    values: dict[str, Any] = {
        "name": "quickstart-sweep-1",
        "recipe_name": "quickstart",
        "recipe_hash": "sha256:" + "r" * 64,
        "requester": "U123",
        "channel": "C1",
        "status": status,
        "kind": "sweep",
        "presets": ["cpu-small"],
        "polyaxon_uuid": "abcdef0123456789",
    }
    values.update(fields)
    return Run(**values)


def row(index: int, status: str, finished: int | None = None, metric: float | None = None) -> TrialRow:
    """A leaderboard row; `finished` is minutes after T0."""
    finished_at = (T0 + timedelta(minutes=finished)).isoformat() if finished is not None else None
    return TrialRow(index=index, name=f"t{index}", status=status, metric=metric, finished_at=finished_at)


def texts(blocks: list[dict[str, Any]]) -> str:
    """Every text of the blocks, one per line."""
    out: list[str] = []
    for block in blocks:
        if "text" in block:
            out.append(str(block["text"]["text"]))
        for element in block.get("elements", []):
            text = element.get("text")
            out.append(str(text["text"]) if isinstance(text, dict) else str(text))
    return "\n".join(out)


def cells(blocks: list[dict[str, Any]]) -> list[list[str]]:
    """The leaderboard's table as the text of each cell (a rich_text cell's texts and emoji codes joined)."""

    def text(cell: dict[str, Any]) -> str:
        if cell["type"] == "raw_text":
            return str(cell["text"])
        parts = cell["elements"][0]["elements"]
        return "".join(p["text"] if p["type"] == "text" else f":{p['name']}:" for p in parts)

    [table] = [block for block in blocks if block["type"] == "table"]
    return [[text(cell) for cell in row] for row in table["rows"]]


def buttons(blocks: list[dict[str, Any]]) -> dict[str, str]:
    """Button label -> its value (an action and a run)."""
    return {
        element["text"]["text"]: element["value"]
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
    }


# -- ranking --


def test_only_succeeded_trials_with_the_contracts_final_evaluation_are_ranked() -> None:
    trials = [
        trial(1, metric=0.80, finished=1),
        trial(2, metric=0.95, final=False, finished=2),
        trial(3, "running", metric=0.99),
        trial(4, "failed", metric=0.97, finished=3),
        trial(5, metric=0.90, finished=4, lr=0.1),
    ]
    rows = trial_rows(make_sweep(5), trials, CONTRACT)
    assert [(r.name, r.rank, r.final) for r in rows] == [
        ("sweep-1-trial-1", 2, True),
        ("sweep-1-trial-2", None, False),
        ("sweep-1-trial-3", None, False),
        ("sweep-1-trial-4", None, False),
        ("sweep-1-trial-5", 1, True),
    ]
    assert rows[4].values == {"lr": 0.1} and rows[4].metric == 0.90
    assert rows[0].finished_at == (T0 + timedelta(minutes=1)).isoformat()
    top = best(rows)
    assert top is not None and top.name == "sweep-1-trial-5"
    assert [r.name for r in ranked(rows)] == ["sweep-1-trial-5", "sweep-1-trial-1"]


def test_a_hash_of_another_contract_is_not_final() -> None:
    run = trial(1, metric=0.9)
    run.last_metrics["eval_contract_hash"] = "sha256:" + "d" * 64
    rows = trial_rows(make_sweep(1), [run], CONTRACT)
    assert rows[0].final is False and rows[0].rank is None and best(rows) is None


def test_without_a_contract_hash_nothing_is_ranked() -> None:
    run = trial(1, metric=0.9)
    run.last_metrics["eval_contract_hash"] = ""
    rows = trial_rows(make_sweep(1), [run], "")
    assert rows[0].rank is None and best(rows) is None


@pytest.mark.parametrize(
    ("higher", "order"),
    [
        (True, ["sweep-1-trial-2", "sweep-1-trial-3", "sweep-1-trial-1"]),
        (False, ["sweep-1-trial-1", "sweep-1-trial-3", "sweep-1-trial-2"]),
    ],
    ids=["higher-is-better", "lower-is-better"],
)
def test_the_direction_of_the_metric_orders_the_ranks(higher: bool, order: list[str]) -> None:
    trials = [trial(1, metric=0.5), trial(2, metric=0.9), trial(3, metric=0.7)]
    rows = trial_rows(make_sweep(3, higher=higher), trials, CONTRACT)
    assert [r.name for r in ranked(rows)] == order
    assert [r.rank for r in ranked(rows)] == [1, 2, 3]


def test_ties_are_broken_by_trial_order() -> None:
    trials = [trial(1, metric=0.5), trial(2, metric=0.9), trial(3, metric=0.9), trial(4, metric=0.9)]
    rows = trial_rows(make_sweep(4), trials, CONTRACT)
    assert [r.name for r in ranked(rows)] == [
        "sweep-1-trial-2",
        "sweep-1-trial-3",
        "sweep-1-trial-4",
        "sweep-1-trial-1",
    ]


def test_ranked_takes_the_top_n() -> None:
    trials = [trial(i, metric=i / 10) for i in range(1, 6)]
    rows = trial_rows(make_sweep(5), trials, CONTRACT)
    assert [r.index for r in ranked(rows, 3)] == [5, 4, 3]
    assert len(ranked(rows)) == 5


def test_a_non_numeric_metric_is_not_ranked() -> None:
    run = trial(1, metric=None)
    run.last_metrics = {"accuracy": True, "eval_contract_hash": CONTRACT}
    rows = trial_rows(make_sweep(1), [run], CONTRACT)
    assert rows[0].metric is None and rows[0].rank is None


# -- counting --


def test_count_counts_missing_trials_as_queued() -> None:
    rows = trial_rows(
        make_sweep(10),
        [trial(1, metric=0.9), trial(2, "running"), trial(3, "failed"), trial(4, "queued"), trial(5, "stopped")],
        CONTRACT,
    )
    counts = count(rows, 10)
    assert (counts.planned, counts.succeeded, counts.running, counts.failed, counts.stopped, counts.waiting) == (
        10,
        1,
        1,
        1,
        1,
        1,
    )
    assert counts.ended == 3
    assert counts.describe() == "1/10 done · 1 running · 1 failed · 1 stopped · 6 queued"


def test_count_never_plans_fewer_than_the_rows() -> None:
    rows = trial_rows(make_sweep(1), [trial(1, metric=0.9), trial(2, "upstream_failed")], CONTRACT)
    counts = count(rows, 1)
    assert counts.planned == 2 and counts.failed == 1
    assert counts.describe() == "1/2 done · 0 running · 1 failed · 0 queued"


# -- the leaderboard --


def test_the_leaderboard_ranks_first_and_marks_what_is_not_final() -> None:
    trials = [
        trial(1, metric=0.80),
        trial(2, metric=0.95, final=False),
        trial(3, "running", metric=0.99),
        trial(4, "queued"),
        trial(5, metric=0.90, lr=0.1),
    ]
    sweep = make_sweep(5)
    text, blocks = render_leaderboard(sweep, trial_rows(sweep, trials, CONTRACT), title="quickstart-sweep-1")
    body = texts(blocks)
    assert blocks[0]["type"] == "header" and "Leaderboard · quickstart-sweep-1" in body
    header, *rows = cells(blocks)
    assert header == ["#", "trial", "lr", "status", "accuracy"]
    assert rows[0] == ["#1", "sweep-1-trial-5 :trophy:", "0.1", "succeeded", "0.9"]
    assert rows[1] == ["#2", "sweep-1-trial-1", "0.01", "succeeded", "0.8"]
    by_name = {r[1]: r for r in rows}
    assert by_name["sweep-1-trial-3"][0] == "–" and by_name["sweep-1-trial-3"][-1] == "0.99 (so far)"
    assert by_name["sweep-1-trial-2"][-1] == "no final evaluation" and by_name["sweep-1-trial-4"][-1] == "—"
    assert "higher is better" in body and "updated as trials finish" in body
    # The text fallback: the summary line, then the same rows as mrkdwn lines, best first.
    first, *lines = text.splitlines()
    assert first == "Leaderboard of quickstart-sweep-1: best sweep-1-trial-5 accuracy=0.9"
    assert lines[0].startswith(":trophy: #1 `sweep-1-trial-5`") and "accuracy *0.9*" in lines[0]
    assert lines[1].startswith("#2 `sweep-1-trial-1`")
    running = next(line for line in lines if "sweep-1-trial-3" in line)
    assert "accuracy 0.99 (so far)" in running and "#" not in running.split("`")[0]
    assert "no final evaluation" in next(line for line in lines if "sweep-1-trial-2" in line)


def test_a_running_trial_is_never_best_so_far() -> None:
    sweep = make_sweep(2)
    rows = trial_rows(sweep, [trial(1, "running", metric=0.99), trial(2, "queued")], CONTRACT)
    text, blocks = render_leaderboard(sweep, rows, title="s")
    assert best(rows) is None and ":trophy:" not in str(cells(blocks)) + text
    assert "(so far)" in cells(blocks)[1][-1]
    assert text.splitlines()[0] == "Leaderboard of s: no trial finished yet"


def test_an_empty_leaderboard_says_polyaxon_is_creating_trials() -> None:
    _, blocks = render_leaderboard(make_sweep(2, higher=False), [], title="s", ended=True)
    body = texts(blocks)
    assert "No trials yet" in body and "lower is better" in body and "final" in body
    assert all(block["type"] != "table" for block in blocks)


def test_a_leaderboard_of_150_trials_shows_the_best_99_and_keeps_the_whole_as_csv() -> None:
    sweep = make_sweep(150)
    trials = [trial(i, metric=(i % 37) / 37, lr=0.01 * i) for i in range(1, 151)]
    rows = trial_rows(sweep, trials, CONTRACT)
    text, blocks = render_leaderboard(sweep, rows, title="big")
    assert len(blocks) <= 50 and sum(1 for b in blocks if b["type"] == "table") == 1
    header, *shown = cells(blocks)
    assert header[-1] == "accuracy" and len(shown) == 99 and [r[0] for r in shown[:3]] == ["#1", "#2", "#3"]
    body = texts(blocks)
    assert "… and 51 more trials (51 ranked)" in body
    assert "the first 99 of 150 trials" in body and "as a CSV file when the sweep ends" in body
    _, ended = render_leaderboard(sweep, rows, title="big", ended=True)
    assert "the whole leaderboard is in this thread as a CSV file" in texts(ended)
    assert len(text) <= 4_000 and text.startswith("Leaderboard of big: best ") and text.endswith(" more")
    table = leaderboard_csv(sweep, rows)
    assert table is not None
    lines = list(csv.reader(io.StringIO(table.decode())))
    assert lines[0] == ["#", "trial", "lr", "status", "accuracy"] and len(lines) == 151
    assert [line[0] for line in lines[1:]] == [f"#{rank}" for rank in range(1, 151)]
    assert leaderboard_csv(sweep, rows[:99]) is None  # 99 trials and the header fit: no file


def test_board_digest_is_stable_and_follows_the_content() -> None:
    sweep = make_sweep(2)
    rows = trial_rows(sweep, [trial(1, metric=0.9), trial(2, "running")], CONTRACT)
    again = trial_rows(sweep, [trial(1, metric=0.9), trial(2, "running")], CONTRACT)
    digest = board_digest(*render_leaderboard(sweep, rows, title="s"))
    assert digest.startswith("sha256:")
    assert board_digest(*render_leaderboard(sweep, again, title="s")) == digest
    changed = trial_rows(sweep, [trial(1, metric=0.9), trial(2, "failed")], CONTRACT)
    assert board_digest(*render_leaderboard(sweep, changed, title="s")) != digest


# -- stop rules --


def test_the_failure_streak_follows_the_finishing_order_not_the_index() -> None:
    rows = [row(1, "failed", finished=5), row(2, "succeeded", finished=1), row(3, "failed", finished=3)]
    assert [r.index for r in failure_streak(rows)] == [3, 1]
    # Trial 2 succeeded last: by finishing time the streak is broken, though the highest index failed.
    rows = [row(1, "failed", finished=1), row(2, "succeeded", finished=9), row(3, "failed", finished=2)]
    assert failure_streak(rows) == []


@pytest.mark.parametrize(
    ("statuses", "streak"),
    [
        (["failed", "failed", "succeeded"], []),
        (["succeeded", "failed", "failed"], [2, 3]),
        (["failed", "stopped", "failed"], [3]),
        (["failed", "upstream_failed", "failed"], [1, 2, 3]),
        (["failed", "failed", "running"], [1, 2]),
    ],
    ids=["success-breaks-it", "latest-failures", "a-stop-breaks-it", "upstream-failed-counts", "unfinished-ignored"],
)
def test_the_failure_streak(statuses: list[str], streak: list[int]) -> None:
    rows = [row(i, s, finished=i if s != "running" else None) for i, s in enumerate(statuses, start=1)]
    assert [r.index for r in failure_streak(rows)] == streak


@pytest.mark.parametrize(
    ("statuses", "cutoff", "reached"),
    [
        (["failed", "failed", "failed"], 3, True),
        (["failed", "failed"], 3, False),
        (["failed", "failed", "succeeded", "failed"], 3, False),
        (["succeeded", "failed", "failed", "failed", "failed"], 3, True),
        (["failed", "failed", "failed"], 0, False),
    ],
    ids=["three-in-a-row", "two-of-three", "broken", "four-after-a-success", "cutoff-off"],
)
def test_cutoff_reached(statuses: list[str], cutoff: int, reached: bool) -> None:
    rows = [row(i, s, finished=i) for i, s in enumerate(statuses, start=1)]
    assert cutoff_reached(rows, cutoff) is reached


@pytest.mark.parametrize(
    ("metric", "target", "higher", "reached"),
    [
        (0.95, 0.9, True, True),
        (0.9, 0.9, True, True),
        (0.85, 0.9, True, False),
        (1.5, 2.0, False, True),
        (2.0, 2.0, False, True),
        (2.5, 2.0, False, False),
        (0.95, None, True, False),
        (None, 0.9, True, False),
    ],
    ids=["above", "at-higher", "below", "loss-below", "at-lower", "loss-above", "no-target", "no-metric"],
)
def test_target_reached(metric: float | None, target: float | None, higher: bool, reached: bool) -> None:
    assert target_reached(row(1, "succeeded", metric=metric), target, higher=higher) is reached


def test_no_best_trial_reaches_no_target() -> None:
    assert target_reached(None, 0.5, higher=True) is False


# -- the card and the summary --


def test_a_running_sweep_card_offers_stop_and_compare_once_two_are_ranked() -> None:
    sweep = make_sweep(4)
    run = sweep_run(overrides={"epochs": 3})
    one = trial_rows(sweep, [trial(1, metric=0.8), trial(2, "running")], CONTRACT)
    text, blocks = render_sweep_card(run, sweep, one, polyaxon_url="https://px.example/runs/abc")
    assert buttons(blocks) == {"Stop sweep": "stop:quickstart-sweep-1"}
    body = texts(blocks)
    assert "<@U123>" in body and "grid over lr ∈ {0.01, 0.1}" in body and "`epochs=3`" in body
    assert "matrix `abcdef01`" in body and "<https://px.example/runs/abc|open in Polyaxon>" in body
    assert "*Best so far* `sweep-1-trial-1`" in body
    assert text == "sweep quickstart quickstart-sweep-1: running, 1/4 done · 1 running · 0 failed · 2 queued"
    two = trial_rows(sweep, [trial(1, metric=0.8), trial(2, metric=0.9)], CONTRACT)
    _, blocks = render_sweep_card(run, sweep, two, polyaxon_url=None)
    assert buttons(blocks) == {
        "Stop sweep": "stop:quickstart-sweep-1",
        "Compare top 3": "compare-top:quickstart-sweep-1",
    }


def test_a_sweep_card_before_any_final_evaluation_says_none_yet() -> None:
    sweep = make_sweep(2)
    _, blocks = render_sweep_card(sweep_run(polyaxon_uuid=None), sweep, [], polyaxon_url=None)
    body = texts(blocks)
    assert "none yet" in body and "not submitted yet" in body


@pytest.mark.parametrize("status", ["succeeded", "stopped", "failed"], ids=["succeeded", "stopped", "failed"])
def test_an_ended_sweep_has_no_stop_button(status: str) -> None:
    sweep = make_sweep(2, stop_reason="3 failed trials in a row")
    rows = trial_rows(sweep, [trial(1, metric=0.8), trial(2, metric=0.9)], CONTRACT)
    _, blocks = render_sweep_card(sweep_run(status), sweep, rows, polyaxon_url=None)
    assert "Stop sweep" not in buttons(blocks)
    assert buttons(blocks) == {"Compare top 3": "compare-top:quickstart-sweep-1"}
    assert "3 failed trials in a row" in texts(blocks)


def test_the_summary_names_the_requester_the_best_trial_and_how_to_register_it() -> None:
    sweep = make_sweep(2, stop_reason="a trial reached accuracy ≥ 0.85")
    rows = trial_rows(sweep, [trial(1, metric=0.8), trial(2, metric=0.9, lr=0.1)], CONTRACT)
    summary = render_summary(sweep_run("succeeded"), sweep, rows)
    assert summary.startswith("<@U123> the sweep *succeeded*")
    assert "`sweep-1-trial-2` lr=0.1 with accuracy *0.9*" in summary
    assert "`/finetune register sweep-1-trial-2 model=NAME`" in summary
    assert "`/finetune compare quickstart-sweep-1 top=3`" in summary
    assert "It stopped early: a trial reached accuracy ≥ 0.85." in summary


def test_the_summary_without_a_ranked_trial_says_nothing_is_ranked() -> None:
    sweep = make_sweep(2)
    rows = trial_rows(sweep, [trial(1, "failed", finished=1), trial(2, metric=0.9, final=False)], CONTRACT)
    summary = render_summary(sweep_run("failed"), sweep, rows)
    assert "<@U123>" in summary and "nothing is ranked" in summary and "register" not in summary


def test_space_text_shows_the_sampler_seed_of_a_random_search() -> None:
    space = [
        {"key": "lr", "input": "lr", "kind": "loguniform", "low": 1e-4, "high": 1e-2},
        {"key": "hidden", "input": "hidden", "kind": "choice", "values": [8, 16]},
    ]
    sweep = make_sweep(8, mode="random", space=space, seed=7)
    assert space_text(sweep) == "random over lr ~ loguniform(0.0001, 0.01) × hidden ∈ {8, 16}, sampler seed 7"


def test_space_text_of_a_grid_has_no_seed() -> None:
    assert space_text(make_sweep(2, seed=7)) == "grid over lr ∈ {0.01, 0.1}"


@pytest.mark.parametrize(
    ("fields", "rules"),
    [
        ({"target": 0.9}, "Stops itself when a trial reaches accuracy ≥ 0.9 or after 3 failed trials in a row"),
        ({"target": 2.5, "higher": False}, "Stops itself when a trial reaches accuracy ≤ 2.5 or after 3 failed"),
        ({"failure_cutoff": 5}, "Stops itself after 5 failed trials in a row"),
        ({"failure_cutoff": 0}, ""),
    ],
    ids=["target-and-cutoff", "lower-is-better", "cutoff-only", "none"],
)
def test_stop_rules(fields: dict[str, Any], rules: str) -> None:
    rest = {k: v for k, v in fields.items() if k != "higher"}
    text = stop_rules(make_sweep(2, higher=bool(fields.get("higher", True)), **rest))
    assert text.startswith(rules) if rules else text == ""


def test_the_card_states_the_stop_rules() -> None:
    sweep = make_sweep(2, target=0.9)
    _, blocks = render_sweep_card(sweep_run(), sweep, [], polyaxon_url=None)
    assert "when a trial reaches accuracy ≥ 0.9" in texts(blocks) and "3 failed trials in a row" in texts(blocks)
