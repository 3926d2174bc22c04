"""The comparison table, pure: which numbers are final, which run is best, what differs between the runs.

Only a run that succeeded has final numbers: its evaluation by the eval contract at the end of training
(the trainer's `eval_results`, the run's outputs with the contract's hash). A stopped, failed or running run
shows its last logged values as *partial* and is never ranked; nor is a run whose lineage has a newer
member in the table (a resume supersedes the run it resumed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from bot.grammar import scalar_text
from bot.slack.blocks import context, escape, header, section
from bot.slack.tables import Cell, Table, overflow_note, table_block, table_csv

# Inputs that say what was trained on and how it is evaluated (pins, the contract), not hyperparameters.
NOT_HYPERPARAMETERS = ("eval_", "recipe_", "dataset_", "model_", "code_revision", "image", "config", "resume_from")


class CompareRow(BaseModel):
    """One run in the table."""

    name: str
    run_id: int
    status: str
    final: bool
    values: dict[str, float] = Field(default_factory=dict)
    step: int | None = None
    max_steps: int | None = None
    lineage: int = 0
    superseded_by: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # A harness suite's standard error of each final metric, as lm-eval computed it (absent for other contracts).
    stderr: dict[str, float] = Field(default_factory=dict)


def final_values(outputs: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, float]:
    """The contract's metrics from a run's outputs when the final evaluation wrote them (its contract hash)."""
    if not outputs.get("eval_contract_hash"):
        return {}
    return {m: float(outputs[m]) for m in metrics if _number(outputs.get(m))}


def final_stderr(outputs: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, float]:
    """The standard error of each final metric a harness run logged beside it (`METRIC_stderr`)."""
    if not outputs.get("eval_contract_hash"):
        return {}
    return {m: float(outputs[f"{m}_stderr"]) for m in metrics if _number(outputs.get(f"{m}_stderr"))}


def within_stderr(rows: Sequence[CompareRow], metric: str, best: CompareRow | None) -> list[str]:
    """Final runs whose `metric` differs from the best run's by no more than their combined standard error
    (sqrt(se_best² + se_run²)): a difference the evaluation cannot tell from noise."""
    if best is None or metric not in best.stderr:
        return []
    notes = []
    for row in rows:
        if row is best or not row.final or row.superseded_by or metric not in row.values or metric not in row.stderr:
            continue
        gap = abs(best.values[metric] - row.values[metric])
        noise = (best.stderr[metric] ** 2 + row.stderr[metric] ** 2) ** 0.5
        if gap <= noise:
            notes.append(
                f"`{escape(row.name)}` is {gap:.3g} from the best on {escape(metric)}, within the standard error "
                f"(±{noise:.3g}): the evaluation does not tell them apart"
            )
    return notes


def logged_values(outputs: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, float]:
    """The last logged value of each metric (what a partial run has)."""
    return {m: float(outputs[m]) for m in metrics if _number(outputs.get(m))}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def mark_superseded(rows: list[CompareRow]) -> None:
    """Within one lineage only the newest run in the table can be ranked."""
    newest: dict[int, CompareRow] = {}
    for row in rows:
        if row.lineage not in newest or row.run_id > newest[row.lineage].run_id:
            newest[row.lineage] = row
    for row in rows:
        leaf = newest[row.lineage]
        row.superseded_by = None if leaf is row else leaf.name


def ranked_rows(rows: Sequence[CompareRow], metric: str) -> list[CompareRow]:
    """The rows that can be ranked on `metric`: final, unsuperseded, measured on it."""
    return [r for r in rows if r.final and r.superseded_by is None and metric in r.values]


def best_row(rows: Sequence[CompareRow], metric: str, higher: bool) -> CompareRow | None:
    """The best final, unsuperseded run by `metric`; None when no run has a final value or the best value is
    shared (a tie has no winner: `tied_rows` names them)."""
    ranked = ranked_rows(rows, metric)
    if not ranked or len(tied_rows(rows, metric, higher)) > 1:
        return None
    return (max if higher else min)(ranked, key=lambda r: r.values[metric])


def tied_rows(rows: Sequence[CompareRow], metric: str, higher: bool) -> list[CompareRow]:
    """The ranked rows that share the best value of `metric` (more than one: a tie)."""
    ranked = ranked_rows(rows, metric)
    if not ranked:
        return []
    top = (max if higher else min)(r.values[metric] for r in ranked)
    return [r for r in ranked if r.values[metric] == top]


def differing_params(rows: Sequence[CompareRow]) -> list[str]:
    """Hyperparameters whose values differ between the runs (a diff, not every key)."""
    keys = sorted({k for r in rows for k in r.params if not k.startswith(NOT_HYPERPARAMETERS)})
    return [k for k in keys if len({repr(r.params.get(k)) for r in rows}) > 1]


class CompareMessage(NamedTuple):
    """The comparison as posted: its text fallback's lines, its blocks, and the whole table when it did not fit."""

    lines: list[str]
    blocks: list[dict[str, Any]]
    csv: bytes | None


def compare_grid(rows: Sequence[CompareRow], *, metric: str, metrics: Sequence[str], best: CompareRow | None) -> Table:
    """The runs as table rows: run (the best bold, with a trophy), state, every metric (± its standard error),
    then the hyperparameters that differ."""
    columns = [metric, *[m for m in metrics if m != metric]]
    params = differing_params(rows)
    cells = [
        [
            Cell(row.name, bold=row is best, emoji="trophy" if row is best else None),
            Cell(_state(row)),
            *[Cell(_value(row, c)) for c in columns],
            *[Cell(_param(row, k)) for k in params],
        ]
        for row in rows
    ]
    return Table(header=["run", "state", *columns, *params], rows=cells, align=dict.fromkeys(columns, "right"))


def render_table(
    rows: Sequence[CompareRow],
    *,
    metric: str,
    higher: bool,
    metrics: Sequence[str],
    contract_hash: str,
    differing_contracts: Sequence[str],
    peers_note: str | None,
) -> CompareMessage:
    """The comparison message: a table of the runs, best marked, every contract metric, the hyperparameters that
    differ; the notes a table cannot carry around it; the whole table as CSV when it has more than 20 columns."""
    best = best_row(rows, metric, higher)
    params = differing_params(rows)
    columns = [metric, *[m for m in metrics if m != metric]]
    grid = compare_grid(rows, metric=metric, metrics=metrics, best=best)
    lines = []
    for row in rows:
        cells = " · ".join(_cell(row, c) for c in columns)
        hyper = " ".join(f"`{escape(k)}={escape(_param(row, k))}`" for k in params)
        mark = " :trophy:" if best is not None and row is best else ""
        lines.append(f"• `{escape(row.name)}`{mark} ({escape(_state(row))}) {cells}" + (f" · {hyper}" if hyper else ""))
    blocks = [header(f"Compare {len(rows)} runs by {metric}")]
    if differing_contracts:
        blocks.append(
            section(":test_tube: *EXPLORATORY — eval contracts differ: " + escape("; ".join(differing_contracts)) + "*")
        )
    if peers_note:
        blocks.append(section(peers_note))
    blocks.append(table_block(grid))
    notes = [
        f"Ranked by the final *{escape(metric)}* ({'higher' if higher else 'lower'} is better) of runs that succeeded, "
        f"evaluated by eval contract `{escape(contract_hash[:19]) or '—'}`; partial runs are shown, never ranked. "
        "Training loss or speed is not ranked."
    ]
    if any(row.stderr for row in rows):
        notes.append("± is the harness's standard error of each metric.")
    notes.extend(within_stderr(rows, metric, best))
    if params:
        notes.append("Columns after the metrics are the hyperparameters that differ between these runs.")
    tied = tied_rows(rows, metric, higher)
    if len(tied) > 1:
        names = ", ".join(f"`{escape(r.name)}`" for r in tied)
        notes.append(
            f"{names} tie on the final *{escape(metric)}* ({tied[0].values[metric]:.4g}): none is marked best."
        )
    elif best is None:
        notes.append("No run here has a final evaluation of it yet, so none is marked best.")
    cut = overflow_note(grid, noun="runs", where="the whole table is in this thread as `compare.csv`")
    if cut:
        notes.append(cut)
    blocks.append(context(*notes))
    return CompareMessage(lines=lines, blocks=blocks, csv=None if grid.fits else table_csv(grid))


def _param(row: CompareRow, key: str) -> str:
    """A hyperparameter's value, or — for a run that has no such key (another trainer's)."""
    return scalar_text(row.params[key]) if row.params.get(key) is not None else "—"


def _cell(row: CompareRow, metric: str) -> str:
    """`metric `0.75 ± 0.12`` for the text fallback."""
    value = _value(row, metric)
    return f"{escape(metric)} {value}" if value == "—" else f"{escape(metric)} `{value}`"


def _value(row: CompareRow, metric: str) -> str:
    """`0.75 ± 0.12` (the standard error when the harness gave one), or — when the run has no value."""
    if metric not in row.values:
        return "—"
    error = f" ± {row.stderr[metric]:.2g}" if metric in row.stderr else ""
    return f"{row.values[metric]:.4g}{error}"


def _state(row: CompareRow) -> str:
    """The run's state as plain text (a table cell; escaped where it goes into mrkdwn)."""
    if row.superseded_by:
        return f"{row.status}, resumed as {row.superseded_by}: not ranked"
    if row.final:
        return f"{row.status}, final eval"
    if row.status == "succeeded":
        # It ended with its own evaluation, but not of these metrics (another contract, compared exploratory).
        return "succeeded, not evaluated on this metric: not ranked"
    progress = f" at step {row.step}" + (f"/{row.max_steps}" if row.max_steps else "") if row.step is not None else ""
    return f"{row.status}{progress}, partial: not ranked"
