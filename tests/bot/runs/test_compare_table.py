"""The comparison table: final numbers from succeeded runs only, one rank per lineage, the parameters that differ."""

from __future__ import annotations

from bot.runs.compare_table import (
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


def test_the_table_marks_one_best_and_partial_runs() -> None:
    a = row("a", 1, loss=2.0, params={"learning_rate": 0.003})
    b = row("b", 2, loss=1.0, params={"learning_rate": 0.001})
    c = row("c", 3, "stopped", final=False, loss=0.5, params={"learning_rate": 0.01}, step=72, max_steps=500)
    rows = [a, b, c]
    mark_superseded(rows)
    blocks = render_table(
        rows,
        metric="eval_loss",
        higher=False,
        metrics=METRICS,
        contract_hash="sha256:abc",
        differing_contracts=[],
        peers_note=None,
    )
    text = "\n".join(str(b.get("text", {}).get("text", "")) for b in blocks)
    lines = {name: next(line for line in text.split("\n") if f"`{name}`" in line) for name in "abc"}
    assert ":trophy:" in lines["b"] and ":trophy:" not in lines["a"] + lines["c"]
    assert "at step 72/500, partial: not ranked" in lines["c"]
    assert "eval_perplexity `" in lines["a"] and "`learning_rate=0.003`" in lines["a"]
