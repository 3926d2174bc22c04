"""Comparing runs on a harness suite (issue 37): per-task metrics with their standard error, a difference within it
said so, and runs whose task versions, data or hashes differ refused naming the task."""

from __future__ import annotations

from typing import Any

from bot.runs.compare_table import CompareRow, final_stderr, render_table, within_stderr
from bot.runs.evals import contract_differences, parse_task_hashes, task_hashes
from storage.models import Run

TASK_A = {"name": "tiny_arith", "version": "1.0", "digest": "sha256:" + "a" * 64}
TASK_C = {"name": "tiny_capitals", "version": "1.0", "digest": "sha256:" + "c" * 64}


def contract(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "harness": "lm-eval",
        "harness_version": "0.4.13",
        "tasks": [TASK_A, TASK_C],
        "num_fewshot": 0,
        "limit": 0,
        "seed": 1234,
        "chat_template": True,
        "metrics": ["tiny_arith-exact_match", "tiny_capitals-acc"],
        "procedure_version": "lm-eval-v1",
    }
    return {**fields, **changes}


def run(run_id: int, name: str, fields: dict[str, Any]) -> Run:
    return Run(id=run_id, name=name, recipe_name="sft-tiny-lmeval", eval_contract=fields, eval_contract_hash="h")


def test_the_same_suite_and_hashes_make_no_difference() -> None:
    runs = [run(1, "a", contract()), run(2, "b", contract())]
    hashes = {1: {"tiny_arith": "x1", "tiny_capitals": "y1"}, 2: {"tiny_arith": "x1", "tiny_capitals": "y1"}}
    assert contract_differences(runs, hashes) == []


def test_a_different_task_hash_is_named_with_the_runs_that_have_each() -> None:
    runs = [run(1, "a", contract()), run(2, "b", contract()), run(3, "c", contract())]
    hashes = {1: {"tiny_capitals": "1" * 20}, 2: {"tiny_capitals": "2" * 20}, 3: {"tiny_capitals": "1" * 20}}
    [difference] = contract_differences(runs, hashes)
    assert difference == (
        f"task tiny_capitals hash (the samples and prompts it evaluated): {'1' * 12} (a, c) vs {'2' * 12} (b)"
    )
    # A run that reported no hash is judged by `outputs`, not guessed at here.
    assert contract_differences(runs[:2], {1: {"tiny_capitals": "1" * 20}}) == []


def test_a_task_version_data_or_harness_version_that_differs_is_named() -> None:
    newer = {**TASK_C, "version": "2.0"}
    runs = [run(1, "a", contract()), run(2, "b", contract(tasks=[TASK_A, newer], harness_version="0.4.14"))]
    differences = contract_differences(runs, {})
    assert "harness_version: 0.4.13 vs 0.4.14" in differences
    assert "task tiny_capitals version: 1.0 vs 2.0" in differences
    runs = [run(1, "a", contract()), run(2, "b", contract(tasks=[TASK_A]))]
    assert any(
        d.startswith("task tiny_capitals version") and "not run by every run" in d
        for d in (contract_differences(runs, {}))
    )


def test_task_hashes_are_read_from_the_results_or_the_outputs_line() -> None:
    document = {"harness": {"tasks": {"tiny_arith": {"hash": "h1"}, "tiny_capitals": {"hash": "h2"}}}}
    assert task_hashes(document) == {"tiny_arith": "h1", "tiny_capitals": "h2"}
    assert task_hashes({"metrics": {}}) == {}
    assert parse_task_hashes("tiny_arith=h1,tiny_capitals=h2") == {"tiny_arith": "h1", "tiny_capitals": "h2"}
    assert parse_task_hashes(None) == {} and parse_task_hashes("garbage") == {}


def cell_row(name: str, run_id: int, acc: float, stderr: float) -> CompareRow:
    return CompareRow(
        name=name,
        run_id=run_id,
        lineage=run_id,
        status="succeeded",
        final=True,
        values={"tiny_capitals-acc": acc},
        stderr={"tiny_capitals-acc": stderr},
    )


def test_the_table_shows_each_metric_with_its_standard_error_and_says_when_a_gap_is_within_it() -> None:
    outputs = {"eval_contract_hash": "h", "tiny_capitals-acc": 0.75, "tiny_capitals-acc_stderr": 0.125}
    assert final_stderr(outputs, ["tiny_capitals-acc"]) == {"tiny_capitals-acc": 0.125}
    assert final_stderr({k: v for k, v in outputs.items() if k != "eval_contract_hash"}, ["tiny_capitals-acc"]) == {}
    best, close, far = cell_row("best", 1, 0.75, 0.1), cell_row("close", 2, 0.70, 0.1), cell_row("far", 3, 0.2, 0.1)
    notes = within_stderr([best, close, far], "tiny_capitals-acc", best)
    assert len(notes) == 1 and notes[0].startswith("`close` is 0.05 from the best") and "±0.141" in notes[0]
    message = render_table(
        [best, close, far],
        metric="tiny_capitals-acc",
        higher=True,
        metrics=["tiny_capitals-acc"],
        contract_hash="sha256:abc",
        differing_contracts=[],
        peers_note=None,
    )
    [table] = [block for block in message.blocks if block["type"] == "table"]
    assert table["rows"][0][2] == {"type": "raw_text", "text": "tiny_capitals-acc"}
    assert [r[2]["text"] for r in table["rows"][1:]] == ["0.75 ± 0.1", "0.7 ± 0.1", "0.2 ± 0.1"]
    text = str(message.blocks)
    assert "± is the harness's standard error" in text and "the evaluation does not tell them apart" in text
    assert any("tiny_capitals-acc `0.75 ± 0.1`" in line for line in message.lines)  # the text fallback
