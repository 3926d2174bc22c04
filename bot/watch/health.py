"""Training health watched from chat: each observation of a running run's metrics through the rules, the alerts
told once per kind in its thread (with the requester's mention or direct message, as failures are), and a run
stopped when its recipe says `stop` for the alert that fired.

The watcher calls `observe` with what its tick already listed (no request of its own); the state it returns is
stored with the run's other progress in one update. An alert is recorded as fired in that state before it is
told; one recorded but not yet told (a Slack error, a crash between the two) is told at the next observation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.health.render import alert_blocks, alert_text
from bot.health.rows import MAX_ROWS, Row, rows_after, watched
from bot.health.rules import NONFINITE_KEYS, Alert, Eval, alarming, judge, paced
from bot.polyaxon import GatewayError
from bot.runs import RunService
from bot.runs.evals import primary_metric
from bot.runs.resume import checkpoint_steps
from storage import repos
from storage.models import Run

log = logging.getLogger(__name__)


def purpose(kind: str) -> str:
    """The thread post's purpose for an alert of `kind` (told once per run)."""
    return f"alert:{kind}"


class HealthWatch:
    """Runs a running run's metrics through its recipe's alert rules; tells and acts on what fires."""

    def __init__(
        self,
        runs: RunService,
        *,
        mention: Callable[[Run], str],
        tell: Callable[[Run, str, str], bool] | None = None,
    ) -> None:
        self.runs = runs
        self.mention = mention
        self.tell = tell  # the requester's direct message (bot.notify), when they chose one

    def observe(
        self,
        run: Run,
        metrics: Mapping[str, float],
        step: int | None,
        outputs: Mapping[str, Any],
        now: datetime,
        *,
        ended: bool = False,
    ) -> tuple[dict[str, Any] | None, list[Alert]]:
        """The run's new health state and the alerts that fired (None: the run watches no alert).

        Each row the run logged goes through the rules once, in step order (bot.health.rows): when the step moved
        (or the run ended), the rows its metrics' history holds after the last one judged. Polyaxon's client
        writes that history every 10 s, so the listing's newest values can be ahead of it: of those, only what
        the `nan` rule reads is judged at once; the rest is judged as its rows arrive. Where the history cannot be
        read, the listing's values are judged as one row (reported)."""
        rules = (run.policy or {}).get("alerts")
        if not rules:
            return None, []
        metric, higher = primary_metric(run.eval_contract or {})
        evaluation = Eval(metric, higher) if metric else None
        state: dict[str, Any] = dict(run.health or {})
        keys = str(outputs.get(NONFINITE_KEYS) or "")
        fired: list[Alert] = []

        def judged(values: Mapping[str, float], at_step: int | None, at: datetime) -> None:
            nonlocal state
            state, now_fired = judge(
                state, values, step=at_step, now=at, alerts=rules, evaluation=evaluation, nonfinite_keys=keys
            )
            fired.extend(now_fired)

        seen = state.get("step")
        moved = step is not None and (seen is None or step > int(seen))
        rows = self._rows(run, state.get("rows_to"), metric) if (moved or ended) else None
        if rows is not None:
            for row in rows:
                judged(row.values, row.step, row.at or now)
            if rows:
                state["rows_to"] = rows[-1].step
            judged(alarming(metrics), step, now)
        elif moved or step is None:  # no history read (or none to read by step): the listing's values, as one row
            judged(metrics, step, now)
            state["rows_to"] = step
        else:  # the step did not move (or went back: a restart): its rows are judged when it moves
            judged(alarming(metrics), step, now)
        return paced(state, step, now), fired

    def _rows(self, run: Run, after: int | None, ranking: str | None) -> list[Row] | None:
        """The rows logged after step `after`, oldest first; None when the history was not read."""
        if run.polyaxon_uuid is None:
            return None
        try:
            history = self.runs.gateway.metric_history(run.polyaxon_uuid, watched(ranking), max_points=MAX_ROWS)
        except GatewayError as exc:
            # Reported; judged on the latest values this time (the rows between are not looked at again).
            log.warning("health of %s: metrics history not read (%s); judged on its latest values", run.name, exc)
            return None
        return rows_after(history, None if after is None else int(after))

    def tell_fired(self, run: Run, fired: list[Alert], outputs: Mapping[str, Any]) -> None:
        """Tell each alert that fired, and stop the run where its recipe says so; then any fired earlier but
        never told. One failing post does not keep the others from being told."""
        kept = checkpoint_steps(outputs)
        rules = (run.policy or {}).get("alerts") or {}
        pending = {a.kind: a for a in fired}
        for kind, step in ((run.health or {}).get("alerted") or {}).items():
            if kind not in pending and kind in rules:
                pending[kind] = Alert(kind, kind, step, float("nan"), "fired earlier", (), str(rules[kind]["action"]))
        for alert in pending.values():
            try:
                self._tell(run, alert, kept)
            except SlackApiError as exc:
                # Recorded as fired: told at the run's next observation.
                log.error("alert %s of %s not posted (told later): %s", alert.kind, run.name, exc.response.get("error"))

    def _tell(self, run: Run, alert: Alert, kept: list[int]) -> None:
        with self.runs.sessions() as s:
            if repos.find_posted_message(s, run_id=run.id or 0, purpose=purpose(alert.kind)) is not None:
                return
        stopped = alert.action == "stop" and self._stop(run, alert)
        text = alert_text(run.name, alert, stopped=stopped, resume_step=good_checkpoint(kept, alert))
        who = self.mention(run)
        self.runs.thread.post_thread(
            run,
            f"{text}\n{who}" if who else text,
            purpose=purpose(alert.kind),
            # No Stop button on a run that is over (its alert told from the rows it logged before it ended).
            blocks=alert_blocks(
                run.name, f"{text}\n{who}" if who else text, stopped=stopped or run.status in repos.TERMINAL_STATUSES
            ),
        )
        if self.tell is not None:
            self.tell(run, "alert", f"{alert.kind}: {alert.metric} {alert.said}")
        self.runs.thread.update_card(run)

    def _stop(self, run: Run, alert: Alert) -> bool:
        """Stop the run as its recipe asked (audited as the bot's); whether Polyaxon took the stop."""
        if run.polyaxon_uuid is None or run.status in repos.TERMINAL_STATUSES:
            return False
        try:
            self.runs.gateway.stop(run.polyaxon_uuid)
        except GatewayError as exc:
            log.error("alert %s: stopping %s failed: %s", alert.kind, run.name, exc)
            return False
        with self.runs.sessions() as s:
            repos.add_audit(
                s, user="finetune-bot", channel=run.channel, command=f"stop {run.name}", outcome="ok",
                run_id=run.id, detail=f"alerts: {{{alert.kind}: stop}} at step {alert.step}",
            )  # fmt: skip
        return True


def good_checkpoint(kept: list[int], alert: Alert) -> int | None:
    """The newest complete checkpoint the run kept from before the alert's step: where a resume starts before it
    went wrong (None when it kept none from before)."""
    before = [step for step in kept if alert.step is None or step < alert.step]
    return max(before) if before else None
