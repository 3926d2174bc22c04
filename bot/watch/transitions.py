"""What a status transition says: recorded once, told in the run's thread with what it means (a success's metrics,
a failure's class and log tail, why it waits, what is over), and what follows it (the requester's direct message,
the run's accelerator-hours, a retry)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bot.failures import WAITING, FailureService, condition_key, informative
from bot.failures.cluster import PROBLEM_TYPES
from bot.failures.render import waited_text, waiting_text
from bot.redact import redact
from bot.runs import RunService
from bot.slack.blocks import escape
from bot.watch.passes import TickStats
from bot.watch.progress import RUNNING
from bot.watch.report import final_eval, metrics_text
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import RunInfo
    from bot.usage import UsageService
    from bot.watch.health import HealthWatch


# The endings whose run may have logged figures since the watcher last listed it (a lost run can't be read).
ENDED_WITH_FIGURES = frozenset({"succeeded", "failed", "stopped"})


class Transitions:
    """Tells a run's status transitions for the watcher."""

    def __init__(
        self,
        runs: RunService,
        failures: FailureService,
        clock: Callable[[], datetime],
        *,
        usage: UsageService | None = None,
        health: HealthWatch | None = None,
    ) -> None:
        self.runs = runs
        self.health = health  # the alert rules, over the rows a run logged since the last look (bot.watch.health)
        self.failures = failures
        self.clock = clock
        self.usage = usage
        self.gateway = runs.gateway

    def _latest_figures(self, run: Run, info: RunInfo, *, final: bool) -> dict[str, Any]:
        """An ended run's figures, the one source every view reads: the last value of each metric it logged (what
        it had before, where Polyaxon has none), with a succeeded run's final evaluation by its eval contract (the
        trainer's results) over the last logged values; its step is the highest any metric reached."""
        summary, step = self.gateway.metrics_summary(run.polyaxon_uuid or "")
        metrics = {k: float(v) for k, v in run.last_metrics.items() if isinstance(v, int | float)} | summary
        if final:
            contract_metrics = [str(m) for m in (run.eval_contract or {}).get("metrics") or []]
            metrics.update(final_eval(info.outputs, contract_metrics))
        fields: dict[str, Any] = {"last_metrics": metrics}
        if step is not None and step >= (run.last_step or 0):
            fields["last_step"] = step
        return fields

    def _last_rows(self, run: Run, info: RunInfo) -> bool:
        """An ended run's rows since the last look through its alert rules: a run that ended between two looks (or
        whose last rows were written as it closed) is told what they showed."""
        if self.health is None:
            return False
        metrics = {k: float(v) for k, v in run.last_metrics.items() if isinstance(v, int | float)}
        health, fired = self.health.observe(run, metrics, run.last_step, info.outputs, self.clock(), ended=True)
        if health is None:
            return False
        with self.runs.sessions() as s:
            fresh = repos.get_run(s, run_id=run.id or 0)
            if fresh is None:
                return True
            repos.update_run(s, fresh, health=health)
        self.health.tell_fired(fresh, fired, info.outputs)
        return True

    def report(self, run: Run, info: RunInfo, stats: TickStats) -> None:
        """Record and tell the status Polyaxon now has for `run` (its conditions read), with what it means."""
        status = info.status
        condition = next((c for c in reversed(info.conditions) if c.type == status), None)
        # A routine step's words (`OperatorController: Operation is running`) say nothing the status does not.
        said = condition is not None and informative(condition.type, condition.reason, condition.message)
        reason = (condition.message or condition.reason) if condition is not None and said else None
        fields: dict[str, Any] = {"last_activity_at": self.clock()}
        # Polyaxon stamps `started_at` on a run stopped before it ever ran: only a run seen running (or that
        # succeeded between two ticks) has started, or the card would say a held run "ran".
        ran = (
            status in RUNNING | {"succeeded"}
            or run.status in RUNNING
            or any(c.type in RUNNING for c in info.conditions)
        )
        if info.started_at and run.started_at is None and ran:
            fields["started_at"] = info.started_at
        if info.finished_at:
            fields["finished_at"] = info.finished_at
        text = f"Status: *{escape(status)}*" + (
            f" — {escape(redact(reason, extra_secrets=self.runs.secrets))}" if reason else ""
        )
        if run.status in PROBLEM_TYPES and run.condition and status not in PROBLEM_TYPES and not reason:
            # Out of what held it (a scheduling problem, a failed attempt): the transition says that is over.
            text = waited_text(status, run.condition)
        upload: tuple[bytes, int] | None = None
        if status in ENDED_WITH_FIGURES:
            # However it ended, the card, the digest and `compare` show the same latest figures: read once more
            # now (the watcher's last listing may be older than what the run logged before it ended).
            fields.update(self._latest_figures(run, info, final=status == "succeeded"))
            stats.polyaxon_requests += 1
        if status == "succeeded":
            contract_metrics = [str(m) for m in (run.eval_contract or {}).get("metrics") or []]
            metrics = dict(fields["last_metrics"])
            text = ":white_check_mark: *succeeded*" + self.failures.attempt_label(run)
            text += metrics_text(metrics, contract_metrics)
            # The requester hears it (and only they are mentioned), once: the transition is told once.
            text = self.failures.with_mention(text, run)
        elif status == "failed":
            # Classified (class, evidence, hint) with the log tail; retried when the recipe's budget allows.
            text, fields["failure"], upload = self.failures.report_failed(run, info)
            stats.polyaxon_requests += 1
        elif status == "stopped":
            text = self.failures.stopped_text(run)
        elif status in WAITING and condition is not None and said:
            # Why it waits is told with this transition, once: the waiting check does not tell it again.
            fields["condition"] = condition_key(condition.reason, condition.message)
            message = redact(condition.message or "", extra_secrets=self.runs.secrets) or None
            text = waiting_text(condition.reason, message, status)
        elif status in WAITING:
            fields["condition"] = None  # a routine step: whatever it waited on before is over
        elif status in {"upstream_failed", "skipped"}:
            words = (
                redact(condition.message or condition.reason or "", extra_secrets=self.runs.secrets)
                if condition
                else ""
            )
            text = self.failures.never_ran_text(run, status, words or None)
        fresh = self.runs.thread.transition(run, status=status, message=reason, text=text, **fields)
        if status in ENDED_WITH_FIGURES and self._last_rows(fresh, info):
            stats.polyaxon_requests += 1  # its metrics' history
        # By direct message too, when they chose it (`notify=`): once per run and reason, never raising.
        self.failures.notifier.tell_end(fresh, status)
        if upload is not None:
            self.runs.thread.upload_to_thread(
                fresh,
                content=upload[0],
                filename=f"{run.name}-failure-logs.txt",
                title=f"{run.name}: last {upload[1]} log lines (redacted)",
                comment="Full log tail of the failed run",
            )
        if status in repos.TERMINAL_STATUSES and self.usage is not None:
            settled = self.usage.settle(fresh)
            self.runs.thread.update_card(settled)
            self.usage.notify_if_near(settled.channel)
        if status == "failed":
            # The retry the recipe's budget allows starts now (or, after a crash, on a later tick).
            stats.transitions += self.failures.after_failed(fresh)
