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
from bot.runs.kinds import RunKind, Verb, kind_of, rule_for, trains
from bot.runs.measured import EVAL, Measured, evaluation_advice, harness_suite, measured_on, newest_evaluations
from bot.runs.plot import Points, legend_labels, plot_histories
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
        picked = [self._subject(find_run_for(self.deps.sessions, ref, Verb.COMPARE)) for ref in cmd.runs]
        told: list[str] = []
        if len(picked) == 1:
            peers = self._peers(picked[0])
            picked += peers
            told.append(
                f"`{escape(picked[0].run.name)}` compared with the {len(peers)} newest finished run(s) of "
                f"*{escape(picked[0].run.recipe_name)}* on the same eval contract, one per lineage: "
                + ", ".join(f"`{escape(p.run.name)}` ({escape(p.run.status)})" for p in peers)
            )
        evaluations = self._evaluations([m.run for m in picked])
        measured, _ = measured_on(picked, lambda run, contract: evaluations.get((run.id or 0, contract)))
        runs = [m.by for m in measured]
        outputs = self._outputs(runs)
        hashes = {run.id or 0: task_hashes_of(outputs.get(run.id or 0, {}), run) for run in runs}
        differing = contract_differences(runs, hashes)
        if differing and not cmd.exploratory:
            suites = {m.by.eval_contract_hash: suite for m in measured if (suite := harness_suite(m.by))}
            raise RunError(
                "these runs were evaluated differently, so their numbers are not comparable: "
                + escape("; ".join(differing))
                + "."
                + escape(evaluation_advice(measured, suites))
                + " Add `--exploratory` to see them anyway (watermarked)."
            )
        told += [
            f"`{escape(m.run.name)}`: its numbers are its evaluation `{escape(m.by.name)}`'s on this contract"
            for m in measured
            if m.evaluated
        ]
        peers_note = "\n".join(told) or None
        contract = runs[0].eval_contract or {}
        # Across contracts (exploratory) every contract's metrics are shown, each run's from its own evaluation.
        metrics = list(dict.fromkeys(str(m) for run in runs for m in (run.eval_contract or {}).get("metrics") or []))
        metric, higher = primary_metric(contract)
        if cmd.metric is not None:
            if metrics and cmd.metric not in metrics:
                raise RunError(
                    f"metric={escape(cmd.metric)} is not measured by the eval contract of these runs "
                    f"({escape(', '.join(metrics))}): runs are ranked by their final evaluation only"
                )
            metric, higher = primary_metric({**contract, "primary_metric": cmd.metric})
        rows = self._rows(measured, metrics or [metric], outputs)
        message = render_table(
            rows,
            metric=metric,
            higher=higher,
            metrics=metrics or [metric],
            contract_hash=runs[0].eval_contract_hash,
            differing_contracts=differing,
            peers_note=peers_note,
        )
        first = measured[0].run
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
        png = plot_histories(
            self._histories([m.run for m in measured], plotted),
            plotted,
            exploratory=bool(differing),
            labels=legend_labels(rows),  # the hyperparameters that differ, as the table shows them
        )
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
        self, measured: Sequence[Measured], metrics: list[str], all_outputs: dict[int, dict[str, Any]]
    ) -> list[CompareRow]:
        """Each run's final evaluation (succeeded: its own or an evaluation of it) or last logged values (partial),
        with its lineage and hyperparameters."""
        with self.deps.sessions() as s:
            roots = repos.lineage_roots(s, run_ids=[m.run.id or 0 for m in measured])
        rows = []
        for m in measured:
            run, by = m.run, m.by
            outputs = all_outputs.get(by.id or 0, {})
            own = [str(x) for x in (by.eval_contract or {}).get("metrics") or []] or metrics
            final = final_values(outputs, own) if by.status == "succeeded" else {}
            max_steps = run.params.get("max_steps")
            rows.append(
                CompareRow(
                    name=run.name,
                    run_id=run.id or 0,
                    status=run.status,
                    final=bool(final),
                    values=final or logged_values(outputs, metrics) or _numbers(by.last_metrics, metrics),
                    step=run.last_step,
                    max_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else None,
                    lineage=roots.get(run.id or 0, run.id or 0),
                    params=dict(run.params),
                    stderr=final_stderr(outputs, own) if final else {},
                )
            )
        mark_superseded(rows)
        return rows

    def _subject(self, run: Run) -> Measured:
        """A named run as compared: an evaluation stands for the run it evaluated, with its numbers."""
        if kind_of(run) is RunKind.EVAL and run.parent_run_id is not None:
            with self.deps.sessions() as s:
                evaluated = repos.get_run(s, run_id=run.parent_run_id)
            if evaluated is not None:
                return Measured(run=evaluated, by=run)
        return Measured(run=run, by=run)

    def _evaluations(self, runs: Sequence[Run]) -> dict[tuple[int, str], Run]:
        """The newest succeeded evaluation of each of the runs on each contract."""
        with self.deps.sessions() as s:
            children = [e for run in runs for e in repos.child_runs(s, parent_id=run.id or 0, kind=EVAL)]
        return newest_evaluations(sorted(children, key=lambda r: -(r.id or 0)))

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

    def _peers(self, subject: Measured) -> list[Measured]:
        """The newest finished training runs of the same recipe measured on the same eval contract (their own, or
        an evaluation of them on it), one per lineage, not the run's."""
        run, contract = subject.run, subject.by.eval_contract_hash
        with self.deps.sessions() as s:
            recent = repos.list_recent_runs(s, limit=200)
        evaluations = newest_evaluations(recent)
        candidates: list[Measured] = []
        for r in recent:
            # Only training runs compared as one run: not a sweep's matrix, a preflight, a serving check or an eval.
            if r.recipe_name != run.recipe_name or not trains(r.kind) or not rule_for(kind_of(r), Verb.COMPARE).as_run:
                continue
            by = r if r.eval_contract_hash == contract else evaluations.get((r.id or 0, contract))
            if by is not None and (r.status in FINISHED or r.id == run.id):
                candidates.append(Measured(run=r, by=by))
        with self.deps.sessions() as s:
            roots = repos.lineage_roots(s, run_ids=[m.run.id or 0 for m in candidates] + [run.id or 0])
        own = roots.get(run.id or 0)
        peers: list[Measured] = []
        seen = {own}
        for candidate in candidates:  # newest first: each lineage is represented by its newest finished run
            root = roots.get(candidate.run.id or 0)
            if root in seen or candidate.run.status not in FINISHED:
                continue
            seen.add(root)
            peers.append(candidate)
            if len(peers) == PEERS:
                break
        if not peers:
            named = escape(subject.by.name)
            what = f" (an evaluation of `{escape(run.name)}`, compared as that run)" if subject.evaluated else ""
            raise RunError(
                f"no other finished run of {escape(run.recipe_name)} on the same eval contract to compare "
                f"`{named}` with{what}; name the runs: `/finetune compare {named} RUN…`"
            )
        return peers


def task_hashes_of(outputs: dict[str, Any], run: Run) -> dict[str, str]:
    """A harness run's task hashes: as its outputs carry them, else as `outputs` recorded them."""
    return parse_task_hashes(outputs.get("eval_task_hashes")) or dict(
        (run.outputs_check or {}).get("eval_task_hashes") or {}
    )


def _numbers(values: dict[str, object], metrics: list[str]) -> dict[str, float]:
    return {m: float(v) for m in metrics if isinstance((v := values.get(m)), int | float) and not isinstance(v, bool)}
