"""A sweep's trials as the leaderboard shows them: their values, status, final eval metric, rank. Pure.

Only a trial that succeeded and wrote its final evaluation under the sweep's eval contract (its outputs carry
the contract's hash) is ranked, by the contract's ranking metric: never by training loss or speed. A running
trial shows its last logged value, marked as such; it is never "best so far".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from bot.slack.blocks import context, escape, header, section
from bot.slack.tables import MAX_TABLE_ROWS, Cell, Table, fallback_text, overflow_note, table_block, table_csv
from storage.models import Run, Sweep
from storage.repos.runs import TERMINAL_STATUSES

WAITING = frozenset({"created", "compiled", "queued", "scheduled", "on_schedule", "unschedulable", "warning"})
RUNNING = frozenset({"starting", "running", "processing", "retrying", "resuming", "stopping"})
FAILED = frozenset({"failed", "upstream_failed"})
# A trial's or a sweep's final states: the run machinery's (a sweep whose submission failed has ended too).
ENDED = TERMINAL_STATUSES


class TrialRow(BaseModel):
    """One trial on the leaderboard."""

    index: int
    name: str
    status: str
    values: dict[str, Any] = Field(default_factory=dict)
    metric: float | None = None
    final: bool = False
    rank: int | None = None
    finished_at: str | None = None


class Counts(BaseModel):
    """How many trials are done, running, failed, stopped and waiting (of those planned)."""

    planned: int
    succeeded: int = 0
    running: int = 0
    failed: int = 0
    stopped: int = 0
    waiting: int = 0

    @property
    def ended(self) -> int:
        """Trials that reached a final state."""
        return self.succeeded + self.failed + self.stopped

    def describe(self) -> str:
        """`2/3 done · 1 running · 0 failed · 0 queued`."""
        parts = [f"{self.succeeded}/{self.planned} done", f"{self.running} running", f"{self.failed} failed"]
        if self.stopped:
            parts.append(f"{self.stopped} stopped")
        not_started = max(0, self.planned - self.ended - self.running - self.waiting)
        parts.append(f"{self.waiting + not_started} queued")
        return " · ".join(parts)


def trial_rows(sweep: Sweep, trials: Sequence[Run], contract_hash: str) -> list[TrialRow]:
    """Each trial with its swept values and metric; succeeded trials with a final evaluation ranked, best first."""
    keys = [(str(axis["key"]), str(axis["input"])) for axis in sweep.space]
    rows: list[TrialRow] = []
    for index, trial in enumerate(trials, start=1):
        value = trial.last_metrics.get(sweep.metric)
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        final = (
            trial.status == "succeeded"
            and number is not None
            and bool(contract_hash)
            and trial.last_metrics.get("eval_contract_hash") == contract_hash
        )
        rows.append(
            TrialRow(
                index=index,
                name=trial.name,
                status=trial.status,
                values={key: trial.params.get(name) for key, name in keys},
                metric=number,
                final=final,
                finished_at=trial.finished_at.isoformat() if trial.finished_at else None,
            )
        )
    ranked = sorted(
        (row for row in rows if row.final and row.metric is not None),
        key=lambda row: (-(row.metric or 0.0) if sweep.higher_is_better else (row.metric or 0.0), row.index),
    )
    for rank, row in enumerate(ranked, start=1):
        row.rank = rank
    return rows


def best(rows: Sequence[TrialRow]) -> TrialRow | None:
    """The best ranked trial, or None before any trial has a final evaluation."""
    return next((row for row in rows if row.rank == 1), None)


def ranked(rows: Sequence[TrialRow], top: int | None = None) -> list[TrialRow]:
    """Ranked trials, best first (the first `top`)."""
    out = sorted((row for row in rows if row.rank is not None), key=lambda row: row.rank or 0)
    return out[:top] if top is not None else out


def count(rows: Sequence[TrialRow], planned: int) -> Counts:
    """Trials by state; `planned` may exceed the rows while Polyaxon has not created them all yet."""
    counts = Counts(planned=max(planned, len(rows)))
    for row in rows:
        if row.status == "succeeded":
            counts.succeeded += 1
        elif row.status in FAILED:
            counts.failed += 1
        elif row.status in ENDED:
            counts.stopped += 1
        elif row.status in RUNNING:
            counts.running += 1
        else:
            counts.waiting += 1
    return counts


def progress(rows: Sequence[TrialRow], planned: int) -> dict[str, Any]:
    """What a digest shows of a sweep (stored with the leaderboard): trial counts and the best trial."""
    counts = count(rows, planned)
    top = best(rows)
    return {
        "planned": counts.planned,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "running": counts.running,
        "best": None if top is None else {"name": top.name, "metric": top.metric, "values": values_text(top.values)},
    }


def values_text(values: dict[str, Any]) -> str:
    """`lr=0.05 hidden=16`."""
    return " ".join(f"{key}={format_value(value)}" for key, value in values.items())


def format_value(value: Any) -> str:
    """A swept value as short text (floats to 4 significant digits)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "?" if value is None else str(value)


def leaderboard_table(sweep: Sweep, rows: Sequence[TrialRow]) -> Table:
    """The trials as table rows, ranked first: place, trial (the best bold, with a trophy), each swept key,
    status, and the metric (final, so far, or none)."""
    keys = [str(axis["key"]) for axis in sweep.space]
    cells = [
        [
            Cell(f"#{row.rank}" if row.rank is not None else "–"),
            Cell(row.name, bold=row.rank == 1, emoji="trophy" if row.rank == 1 else None),
            *[Cell(format_value(row.values.get(key))) for key in keys],
            Cell(row.status),
            Cell(_shown(row)),
        ]
        for row in _ordered(rows)
    ]
    header = ["#", "trial", *keys, "status", sweep.metric]
    return Table(header=header, rows=cells, align={"#": "right", sweep.metric: "right"})


def leaderboard_csv(sweep: Sweep, rows: Sequence[TrialRow]) -> bytes | None:
    """The whole leaderboard as CSV when a table block cannot hold it (over 99 trials or 20 columns), else None."""
    table = leaderboard_table(sweep, rows)
    return None if table.fits else table_csv(table)


def render_leaderboard(
    sweep: Sweep, rows: Sequence[TrialRow], *, title: str, ended: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """The leaderboard message (one, edited in place): a table of the ranked trials first, then the others by
    trial number; its text fallback is the same as lines."""
    direction = "higher is better" if sweep.higher_is_better else "lower is better"
    blocks: list[dict[str, Any]] = [header(f"Leaderboard · {title}")]
    notes = [
        f"ranked by the eval contract's *{escape(sweep.metric)}* ({direction}), final evaluations only; "
        f"never by training loss or speed · {'final' if ended else 'updated as trials finish'}"
    ]
    if rows:
        table = leaderboard_table(sweep, rows)
        blocks.append(table_block(table))
        left = _ordered(rows)[MAX_TABLE_ROWS - 1 :]
        if left:
            ranked_left = sum(1 for r in left if r.rank is not None)
            notes.append(f"… and {len(left)} more trials ({ranked_left} ranked)")
        # The CSV is posted once, with the summary: a leaderboard edited on every trial would repost it each time.
        where = "the whole leaderboard is in this thread as a CSV file"
        if not ended:
            where = "the whole leaderboard comes in this thread as a CSV file when the sweep ends"
        cut = overflow_note(table, noun="trials", where=where)
        if cut:
            notes.append(cut)
    else:
        blocks.append(section("_No trials yet: Polyaxon is creating them._"))
    blocks.append(context(*notes))
    top = best(rows)
    first = f"Leaderboard of {title}: " + (
        f"best {top.name} {sweep.metric}={format_value(top.metric)}" if top else "no trial finished yet"
    )
    # The notification text is mrkdwn too: the first line escaped here, the trial lines by _line.
    return fallback_text(escape(first), [_line(row, sweep.metric) for row in _ordered(rows)]), blocks


def board_digest(text: str, blocks: list[dict[str, Any]]) -> str:
    """What the leaderboard shows, as a digest: it is edited only when this changes."""
    payload = json.dumps({"text": text, "blocks": blocks}, sort_keys=True)
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def _ordered(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """Ranked trials best first, then the others by trial number."""
    return ranked(rows) + [row for row in rows if row.rank is None]


def _shown(row: TrialRow) -> str:
    """The trial's metric as its cell reads: final, so far (running), or why there is none."""
    if row.final:
        return format_value(row.metric)
    if row.metric is not None and row.status in RUNNING:
        return f"{format_value(row.metric)} (so far)"
    if row.status == "succeeded":
        return "no final evaluation"
    return "—"


def _line(row: TrialRow, metric: str) -> str:
    """The trial as one mrkdwn line of the text fallback."""
    mark = ":trophy: " if row.rank == 1 else ""
    place = f"#{row.rank}" if row.rank is not None else "–"
    if row.final:
        shown = f"{escape(metric)} *{format_value(row.metric)}*"
    elif row.metric is not None and row.status in RUNNING:
        shown = f"{escape(metric)} {format_value(row.metric)} (so far)"
    else:
        shown = _shown(row)
    return f"{mark}{place} `{escape(row.name)}` {escape(values_text(row.values))} · {escape(row.status)} · {shown}"
