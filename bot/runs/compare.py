"""`/finetune compare`: runs side by side on one eval contract, a table and a plot in the first run's thread."""

from __future__ import annotations

from collections.abc import Sequence

from bot.grammar import CompareCommand
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.evals import contract_differences, primary_metric
from bot.runs.lookup import find_run
from bot.runs.plot import Points, plot_histories
from bot.runs.thread import RunThread
from bot.slack.blocks import context, header, section
from storage import repos
from storage.models import Run


class Comparer:
    """Compares runs by the recipe's eval metric; refuses runs evaluated differently unless `--exploratory`."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def compare(self, cmd: CompareCommand, *, user: str) -> Reply:
        """Table + plot in the first run's thread; refused across eval contracts unless --exploratory."""
        runs = [find_run(self.deps.sessions, ref) for ref in cmd.runs]
        if len(runs) == 1:
            runs += self._peers(runs[0])
        differing = contract_differences(runs)
        if differing and not cmd.exploratory:
            raise RunError(
                "these runs were evaluated differently, so their numbers are not comparable: "
                + "; ".join(differing)
                + ". Add `--exploratory` to see them anyway (watermarked)."
            )
        metric, higher = primary_metric(runs[0].eval_contract or {})
        metric = cmd.metric or metric
        rows: list[tuple[Run, dict[str, float]]] = []
        for run in runs:
            values = self.deps.gateway.last_metrics(run.polyaxon_uuid) if run.polyaxon_uuid else {}
            rows.append((run, values))
        ranked = [r for r in rows if metric in r[1]]
        best = (max if higher else min)(ranked, key=lambda r: r[1][metric])[0].name if ranked else None
        columns = [metric] + [m for m in ("eval_perplexity", "loss", "train_runtime") if m != metric]
        lines = []
        for run, values in rows:
            cells = " · ".join(f"{c} `{values[c]:.4g}`" if c in values else f"{c} —" for c in columns)
            mark = " :trophy:" if run.name == best else ""
            lines.append(f"• `{run.name}`{mark} ({run.status}) {cells}")
        watermark = (
            ":test_tube: *EXPLORATORY — eval contracts differ: " + "; ".join(differing) + "*" if differing else ""
        )
        note = (
            f"Ranked by *{metric}* ({'higher' if higher else 'lower'} is better), the recipe's eval metric; "
            "training loss or speed alone is not ranked."
        )
        blocks = [header(f"Compare {len(runs)} runs by {metric}")]
        if watermark:
            blocks.append(section(watermark))
        blocks += [section("\n".join(lines)), context(note)]
        first = runs[0]
        self.thread.post_thread(
            first, f"Comparison of {len(runs)} runs (asked by <@{user}>)", purpose="compare", blocks=blocks
        )
        plotted = [metric, "loss"]
        png = plot_histories(self._histories([run for run, _ in rows], plotted), plotted, exploratory=bool(differing))
        if png is not None:
            self.thread.upload_to_thread(
                first,
                content=png,
                filename="compare.png",
                title=f"{metric} by step",
                comment=("EXPLORATORY — " if differing else "") + f"{metric} and loss by step",
            )
        return Reply(text=f"Posted the comparison in the thread of `{first.name}`.")

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

    def _peers(self, run: Run, limit: int = 4) -> list[Run]:
        """The newest finished runs of the same recipe on the same eval contract (what one run is compared with)."""
        with self.deps.sessions() as s:
            recent = repos.list_recent_runs(s, limit=200)
        peers = [
            r
            for r in recent
            if r.id != run.id
            and r.recipe_name == run.recipe_name
            and r.eval_contract_hash == run.eval_contract_hash
            and r.status in {"succeeded", "stopped"}
        ][:limit]
        if not peers:
            raise RunError(
                f"no other finished run of {run.recipe_name} on the same eval contract to compare "
                f"`{run.name}` with; name the runs: `/finetune compare {run.name} RUN…`"
            )
        return peers
