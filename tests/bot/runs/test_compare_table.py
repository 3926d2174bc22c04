"""The comparison table: final numbers from succeeded runs only, one rank per lineage, the parameters that differ."""

from __future__ import annotations

import csv
import io
from typing import Any

from bot.runs.compare_table import (
    CompareMessage,
    CompareRow,
    best_row,
    differing_params,
    final_values,
    logged_values,
    mark_superseded,
    render_table,
)

METRICS = ["eval_loss", "eval_perplexity"]


def row(
    name: str, run_id: int, status: str = "succeeded", *, final: bool = True, loss: float = 1.0, **kw: object
) -> CompareRow:
    values = {"eval_loss": loss, "eval_perplexity": 2.718**loss}
    fields: dict[str, object] = {"lineage": run_id, **kw}
    return CompareRow(name=name, run_id=run_id, status=status, final=final, values=values, **fields)


def test_final_values_need_the_contract_hash_of_the_final_evaluation() -> None:
    outputs = {"eval_loss": 3.5, "eval_perplexity": 33.1, "loss": 3.2}
    assert final_values(outputs, METRICS) == {}  # last logged values, no final evaluation
    assert final_values({**outputs, "eval_contract_hash": "sha256:x"}, METRICS) == {
        "eval_loss": 3.5,
        "eval_perplexity": 33.1,
    }
    assert logged_values(outputs, METRICS) == {"eval_loss": 3.5, "eval_perplexity": 33.1}
    assert logged_values({"eval_loss": True}, METRICS) == {}


def test_only_final_unsuperseded_runs_are_ranked() -> None:
    stopped = row("mid", 1, "stopped", final=False, loss=0.1)  # best number, but mid-training
    worse, better = row("a", 2, loss=2.0), row("b", 3, loss=1.5)
    rows = [stopped, worse, better]
    mark_superseded(rows)
    assert best_row(rows, "eval_loss", higher=False) is better
    assert best_row([stopped], "eval_loss", higher=False) is None


def test_a_resume_supersedes_the_run_it_resumed() -> None:
    parent = row("parent", 1, loss=0.5)
    child = row("child", 2, loss=0.9, lineage=1)
    rows = [child, parent]
    mark_superseded(rows)
    assert parent.superseded_by == "child" and child.superseded_by is None
    assert best_row(rows, "eval_loss", higher=False) is child


def test_only_the_hyperparameters_that_differ_become_columns() -> None:
    a = row("a", 1, params={"learning_rate": 0.003, "max_steps": 20, "eval_seed": 0, "recipe_hash": "x"})
    b = row("b", 2, params={"learning_rate": 0.001, "max_steps": 20, "eval_seed": 0, "recipe_hash": "y"})
    assert differing_params([a, b]) == ["learning_rate"]


def cells(block: dict[str, Any]) -> list[list[str]]:
    """A table block's rows as the text of each cell (a rich_text cell's texts and emoji codes joined)."""

    def text(cell: dict[str, Any]) -> str:
        if cell["type"] == "raw_text":
            return str(cell["text"])
        parts = cell["elements"][0]["elements"]
        return "".join(p["text"] if p["type"] == "text" else f":{p['name']}:" for p in parts)

    return [[text(cell) for cell in row] for row in block["rows"]]


def compared(rows: list[CompareRow], metrics: list[str] = METRICS) -> CompareMessage:
    mark_superseded(rows)
    return render_table(
        rows,
        metric=metrics[0],
        higher=False,
        metrics=metrics,
        contract_hash="sha256:abc",
        differing_contracts=[],
        peers_note=None,
    )


def test_the_table_marks_one_best_and_partial_runs() -> None:
    a = row("a", 1, loss=2.0, params={"learning_rate": 0.003})
    b = row("b", 2, loss=1.0, params={"learning_rate": 0.001})
    c = row("c", 3, "stopped", final=False, loss=0.5, params={"learning_rate": 0.01}, step=72, max_steps=500)
    message = compared([a, b, c])
    [table] = [block for block in message.blocks if block["type"] == "table"]
    header, *body = cells(table)
    assert header == ["run", "state", "eval_loss", "eval_perplexity", "learning_rate"]
    by_name = {r[0].removesuffix(" :trophy:"): r for r in body}
    assert by_name["b"][0] == "b :trophy:" and by_name["a"][0] == "a" and by_name["c"][0] == "c"
    [best] = [cell for r in table["rows"] for cell in r if cell["type"] == "rich_text"]
    assert best["elements"][0]["elements"][0]["style"] == {"bold": True}
    assert by_name["c"][1] == "stopped at step 72/500, partial: not ranked"
    assert by_name["a"][1] == "succeeded, final eval"
    assert by_name["a"][2:] == ["2", f"{2.718**2.0:.4g}", "0.003"]
    assert table["column_settings"] == [{"align": "left"}, {"align": "left"}, {"align": "right"}, {"align": "right"}]
    # The text fallback says the same as lines (mrkdwn), and the notes stay beside the table.
    lines = {name: next(line for line in message.lines if f"`{name}`" in line) for name in "abc"}
    assert ":trophy:" in lines["b"] and ":trophy:" not in lines["a"] + lines["c"]
    assert "at step 72/500, partial: not ranked" in lines["c"]
    assert "eval_perplexity `" in lines["a"] and "`learning_rate=0.003`" in lines["a"]
    assert "hyperparameters that differ" in str(message.blocks[-1]) and message.csv is None


def test_a_resumed_run_says_which_run_resumed_it() -> None:
    parent, child = row("parent", 1, loss=0.5), row("child", 2, loss=0.9, lineage=1)
    body = cells(next(b for b in compared([child, parent]).blocks if b["type"] == "table"))[1:]
    assert body[1][:2] == ["parent", "succeeded, resumed as child: not ranked"]


def test_more_columns_than_a_table_holds_are_cut_with_a_note_and_the_whole_table_as_csv() -> None:
    metrics = [f"task{i}-acc" for i in range(24)]  # a harness suite of many tasks: 2 + 24 columns

    def wide(name: str, run_id: int, acc: float) -> CompareRow:
        values = {m: acc for m in metrics}
        return CompareRow(name=name, run_id=run_id, lineage=run_id, status="succeeded", final=True, values=values)

    message = compared([wide("a", 1, 0.5), wide("b", 2, 0.25)], metrics)
    [table] = [block for block in message.blocks if block["type"] == "table"]
    assert len(table["rows"]) == 3 and {len(r) for r in table["rows"]} == {20}
    assert "the first 20 of 26 columns" in str(message.blocks[-1]) and "`compare.csv`" in str(message.blocks[-1])
    assert message.csv is not None
    lines = list(csv.reader(io.StringIO(message.csv.decode())))
    assert lines[0] == ["run", "state", *metrics] and lines[1][:3] == ["a", "succeeded, final eval", "0.5"]
    assert lines[2][0] == "b :trophy:" and len(lines[2]) == 26  # lower is better here


def _render(rows: list[CompareRow], *, metric: str = "eval_loss", higher: bool = False) -> CompareMessage:
    return render_table(
        rows, metric=metric, higher=higher, metrics=METRICS, contract_hash="sha256:c", differing_contracts=[],
        peers_note=None,
    )  # fmt: skip


def test_a_tie_has_no_trophy_and_says_so() -> None:
    message = _render([row("a", 1, loss=1.0), row("b", 2, loss=1.0)], metric="eval_loss")
    text = "\n".join(message.lines) + str(message.blocks)
    assert ":trophy:" not in text and "trophy" not in str(message.blocks), text
    assert "`a`, `b` tie on the final *eval_loss* (1): none is marked best." in str(message.blocks)
    assert best_row([row("a", 1, loss=1.0), row("b", 2, loss=1.0)], "eval_loss", higher=False) is None
    assert best_row([row("a", 1, loss=1.0), row("b", 2, loss=2.0)], "eval_loss", higher=False).name == "a"  # type: ignore[union-attr]


def test_across_trainers_a_succeeded_run_without_the_metric_and_a_missing_key_read_plainly() -> None:
    # An SFT run and a DPO run compared exploratory: the DPO run has its own contract's metrics, not eval_loss,
    # and only it has `beta`.
    sft = row("sft", 1, params={"learning_rate": 2e-5})
    dpo = CompareRow(
        name="dpo", run_id=2, status="succeeded", final=False, values={}, step=20, max_steps=20, lineage=2,
        params={"learning_rate": 2e-5, "beta": 0.1},
    )  # fmt: skip
    message = _render([sft, dpo])
    [line] = [line for line in message.lines if line.startswith("• `dpo`")]
    assert "succeeded, not evaluated on this metric: not ranked" in line and "partial" not in line, line
    assert "None" not in "\n".join(message.lines) and "None" not in str(message.blocks), message.lines
    [sft_line] = [line for line in message.lines if line.startswith("• `sft`")]
    assert "`beta=—`" in sft_line and ":trophy:" in sft_line, sft_line
