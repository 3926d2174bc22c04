"""The smoke-first gate as the run service applies it: the stored preflight of a plan's gate key, and who may skip.

The decision itself is the catalog's (`bot.catalog.gate.check_gate`); this reads the newest passed preflight
of the plan's recipe, pins, presets and memory params from storage, and refuses `--skip-preflight` from
anyone but an approver (the same approvers as registration). A passed preflight counts only while Polyaxon still
has its run: one it no longer has (lost) is no evidence, whatever the database says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.catalog import GateVerdict, PassedPreflight, check_gate, preflight_command
from bot.grammar import RunCommand
from bot.runs.errors import RunError
from bot.slack.blocks import escape, mention
from storage import repos
from storage.db import SessionFactory

if TYPE_CHECKING:
    from bot.catalog import Plan
    from bot.runs.lost import LostRuns
    from bot.slack.people import People


def report_lines(report: dict[str, Any] | None) -> list[str]:
    """One line per check of a preflight report: `memory: ok — …` (the evidence the card and trace show)."""
    lines = []
    for line in (report or {}).get("lines") or []:
        ok = line.get("ok")
        state = "ok" if ok is True else "FAILED" if ok is False else "not run"
        lines.append(f"{line.get('name', '?')}: {state} — {line.get('summary', '')}".strip())
    return lines


class PreflightGate:
    """May this plan be submitted: single-process yes; distributed after a passed preflight, or skipped."""

    def __init__(self, sessions: SessionFactory, people: People, *, lost: LostRuns | None = None) -> None:
        self.sessions = sessions
        self.people = people
        # Checks a passed preflight's run against Polyaxon (and records it lost when gone); None: the database only.
        self.lost = lost

    def passed(self, plan: Plan) -> PassedPreflight | None:
        """The newest passed preflight of the plan's gate key, as the gate sees it."""
        return self.evidence(plan)[0]

    def evidence(self, plan: Plan) -> tuple[PassedPreflight | None, str | None]:
        """The newest passed preflight whose run Polyaxon still has, and the name of a newer one it no longer has."""
        if not plan.gate_key:
            return None, None
        with self.sessions() as s:
            row = repos.passed_preflight(s, gate_key=plan.gate_key)
            if row is None:
                return None, None
            run = repos.get_run(s, run_id=row.run_id) if row.run_id is not None else None
        if run is not None and (
            run.status == repos.LOST_STATUS or (self.lost is not None and not self.lost.still_there(run))
        ):
            # Lost: evidence Polyaxon no longer holds (deleted there, or another server's store) counts for nothing.
            return None, run.name
        report = row.report or {}
        return PassedPreflight(
            run_name=run.name if run is not None else f"preflight {row.id}",
            finished_at=row.finished_at.isoformat(timespec="seconds") if row.finished_at else "",
            wall_s=report.get("wall_s"),
            world_size=report.get("expected_world_size"),
            lines=report_lines(report),
        ), None

    def verdict(self, plan: Plan, cmd: RunCommand, *, user: str, submitting: bool = True) -> GateVerdict:
        """The gate's verdict; `--skip-preflight` by a non-approver raises RunError when submitting."""
        if not plan.distributed:
            return GateVerdict(allowed=True)
        if cmd.skip_preflight and submitting and user not in self.people.approvers():
            raise RunError(
                f"only an approver may `--skip-preflight` (FINETUNE_APPROVERS); {mention(user)} is not one. "
                f"Run the preflight first: `{escape(self.command(plan, cmd))}`"
            )
        passed, lost = self.evidence(plan)
        return check_gate(
            plan,
            passed,
            skip=cmd.skip_preflight,
            skipper=user,
            command=self.command(plan, cmd),
            lost_preflight=lost,
        )

    @staticmethod
    def command(plan: Plan, cmd: RunCommand) -> str:
        """The `/finetune preflight` that would validate this plan."""
        return preflight_command(plan, dict(cmd.overrides), dict(cmd.written))
