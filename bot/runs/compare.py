"""`/finetune compare`: runs side by side on one eval contract, a table and a plot in the first run's thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.grammar import CompareCommand
from bot.runs.admit import find_run_for
from bot.runs.compare_table import (
    CompareRow,
    final_stderr,
    final_values,
    logged_values,
    mark_superseded,
    render_table,
)
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.evals import contract_differences, parse_task_hashes, primary_metric
from bot.runs.kinds import Verb, kind_of, rule_for
from bot.runs.plot import Points, plot_histories
from bot.runs.thread import RunThread
from bot.slack.blocks import escape, mention
from bot.slack.tables import fallback_text
from storage import repos
from storage.models import Run

FINISHED = frozenset({"succeeded", "stopped", "failed"})
PEERS = 4


class Comparer:
    """Compares runs by the final evaluation of their eval contract; refuses different contracts unless exploratory."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def compare(self, cmd: CompareCommand, *, user: str) -> Reply:
        """Table + plot in the first run's thread; refused across eval contracts unless --exploratory."""
        runs = [find_run_for(self.deps.sessions, ref, Verb.COMPARE) for ref in cmd.runs]
        peers_note = None
        if len(runs) == 1:
            peers = self._peers(runs[0])
            runs += peers
            peers_note = (
                f"`{escape(runs[0].name)}` compared with the {len(peers)} newest finished run(s) of "
                f"*{escape(runs[0].recipe_name)}* on the same eval contract, one per lineage: "
                + ", ".join(f"`{escape(p.name)}` ({escape(p.status)})" for p in peers)
            )
        outputs = self._outputs(runs)
        hashes = {run.id or 0: task_hashes_of(outputs.get(run.id or 0, {}), run) for run in runs}
        differing = contract_differences(runs, hashes)
        if differing and not cmd.exploratory:
            raise RunError(
                "these runs were evaluated differently, so their numbers are not comparable: "
                + escape("; ".join(differing))
                + ". Add `--exploratory` to see them anyway (watermarked)."
            )
        contract = runs[0].eval_contract or {}
        metrics = [str(m) for m in contract.get("metrics") or []]
        metric, higher = primary_metric(contract)
        if cmd.metric is not None:
            if metrics and cmd.metric not in metrics:
                raise RunError(
                    f"metric={escape(cmd.metric)} is not measured by the eval contract of these runs "
                    f"({escape(', '.join(metrics))}): runs are ranked by their final evaluation only"
                )
            metric, higher = primary_metric({**contract, "primary_metric": cmd.metric})
        rows = self._rows(runs, metrics or [metric], outputs)
        message = render_table(
            rows,
            metric=metric,
            higher=higher,
            metrics=metrics or [metric],
            contract_hash=runs[0].eval_contract_hash,
            differing_contracts=differing,
            peers_note=peers_note,
        )
        first = runs[0]
        title = f"Comparison of {len(runs)} runs (asked by {mention(user)})"
        self.thread.post_thread(first, fallback_text(title, message.lines), purpose="compare", blocks=message.blocks)
        if message.csv is not None:
            self.thread.upload_to_thread(
                first,
                content=message.csv,
                filename="compare.csv",
                title=f"Comparison of {len(runs)} runs by {metric}",
                comment="The whole comparison: more columns than a Slack table holds",
            )
        plotted = [metric, "loss"]
        png = plot_histories(self._histories(runs, plotted), plotted, exploratory=bool(differing))
        if png is not None:
            self.thread.upload_to_thread(
                first,
                content=png,
                filename="compare.png",
                title=f"{metric} by step",
                comment=("EXPLORATORY — " if differing else "") + f"{metric} and loss by step",
            )
        return Reply(text=f"Posted the comparison in the thread of `{escape(first.name)}`.")

    def _outputs(self, runs: Sequence[Run]) -> dict[int, dict[str, Any]]:
        """Each run's outputs as Polyaxon has them now (empty for a run not yet there)."""
        gateway = self.deps.gateway
        return {
            run.id or 0: dict(gateway.get_run(run.polyaxon_uuid, with_conditions=False).outputs)
            for run in runs
            if run.polyaxon_uuid
        }

    def _rows(
        self, runs: Sequence[Run], metrics: list[str], all_outputs: dict[int, dict[str, Any]]
    ) -> list[CompareRow]:
        """Each run's final evaluation (succeeded) or last logged values (partial), with its lineage."""
        with self.deps.sessions() as s:
            roots = repos.lineage_roots(s, run_ids=[run.id or 0 for run in runs])
        rows = []
        for run in runs:
            outputs = all_outputs.get(run.id or 0, {})
            final = final_values(outputs, metrics) if run.status == "succeeded" else {}
            max_steps = run.params.get("max_steps")
            rows.append(
                CompareRow(
                    name=run.name,
                    run_id=run.id or 0,
                    status=run.status,
                    final=bool(final),
                    values=final or logged_values(outputs, metrics) or _numbers(run.last_metrics, metrics),
                    step=run.last_step,
                    max_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else None,
                    lineage=roots.get(run.id or 0, run.id or 0),
                    params=dict(run.params),
                    stderr=final_stderr(outputs, metrics) if final else {},
                )
            )
        mark_superseded(rows)
        return rows

    def _histories(self, runs: Sequence[Run], metrics: list[str]) -> dict[str, dict[str, Points]]:
        """Each run's metric histories by step (runs not yet on Polyaxon are left out)."""
        out: dict[str, dict[str, Points]] = {}
        for run in runs:
            if not run.polyaxon_uuid:
                continue
            history = self.deps.gateway.metric_history(run.polyaxon_uuid, metrics, max_points=200)
            out[run.name] = {
                name: [(p.step, p.value) for p in points if p.step is not None] for name, points in history.items()
            }
        return out

    def _peers(self, run: Run) -> list[Run]:
        """The newest finished runs of the same recipe on the same eval contract, one per lineage, not the run's."""
        with self.deps.sessions() as s:
            recent = [
                r
                for r in repos.list_recent_runs(s, limit=200)
                if r.recipe_name == run.recipe_name
                and r.eval_contract_hash == run.eval_contract_hash
                # Only kinds that are compared as one run: not a sweep's matrix, a preflight or a serving check.
                and rule_for(kind_of(r), Verb.COMPARE).as_run
                and (r.status in FINISHED or r.id == run.id)
            ]
        with self.deps.sessions() as s:
            roots = repos.lineage_roots(s, run_ids=[r.id or 0 for r in recent])
        own = roots.get(run.id or 0)
        peers: list[Run] = []
        seen = {own}
        for candidate in recent:  # newest first: each lineage is represented by its newest finished run
            root = roots.get(candidate.id or 0)
            if root in seen or candidate.status not in FINISHED:
                continue
            seen.add(root)
            peers.append(candidate)
            if len(peers) == PEERS:
                break
        if not peers:
            raise RunError(
                f"no other finished run of {escape(run.recipe_name)} on the same eval contract to compare "
                f"`{escape(run.name)}` with; name the runs: `/finetune compare {escape(run.name)} RUN…`"
            )
        return peers


def task_hashes_of(outputs: dict[str, Any], run: Run) -> dict[str, str]:
    """A harness run's task hashes: as its outputs carry them, else as `outputs` recorded them."""
    return parse_task_hashes(outputs.get("eval_task_hashes")) or dict(
        (run.outputs_check or {}).get("eval_task_hashes") or {}
    )


def _numbers(values: dict[str, object], metrics: list[str]) -> dict[str, float]:
    return {m: float(v) for m in metrics if isinstance((v := values.get(m)), int | float) and not isinstance(v, bool)}
