"""The smoke-first gate as the run service applies it: the stored preflight of a plan's gate key, and who may skip.

The decision itself is the catalog's (`bot.catalog.gate.check_gate`); this reads the newest passed preflight
of the plan's recipe, pins, presets and memory params from storage, and refuses `--skip-preflight` from
anyone but an approver (the same approvers as registration).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.catalog import GateVerdict, PassedPreflight, check_gate, preflight_command
from bot.grammar import RunCommand
from bot.runs.errors import RunError
from storage import repos
from storage.db import SessionFactory

if TYPE_CHECKING:
    from bot.catalog import Plan
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

    def __init__(self, sessions: SessionFactory, people: People) -> None:
        self.sessions = sessions
        self.people = people

    def passed(self, plan: Plan) -> PassedPreflight | None:
        """The newest passed preflight of the plan's gate key, as the gate sees it."""
        if not plan.gate_key:
            return None
        with self.sessions() as s:
            row = repos.passed_preflight(s, gate_key=plan.gate_key)
            if row is None:
                return None
            run = repos.get_run(s, run_id=row.run_id) if row.run_id is not None else None
        report = row.report or {}
        return PassedPreflight(
            run_name=run.name if run is not None else f"preflight {row.id}",
            finished_at=row.finished_at.isoformat(timespec="seconds") if row.finished_at else "",
            wall_s=report.get("wall_s"),
            world_size=report.get("expected_world_size"),
            lines=report_lines(report),
        )

    def verdict(self, plan: Plan, cmd: RunCommand, *, user: str, submitting: bool = True) -> GateVerdict:
        """The gate's verdict; `--skip-preflight` by a non-approver raises RunError when submitting."""
        if not plan.distributed:
            return GateVerdict(allowed=True)
        if cmd.skip_preflight and submitting and user not in self.people.approvers():
            raise RunError(
                f"only an approver may `--skip-preflight` (FINETUNE_APPROVERS); <@{user}> is not one. "
                f"Run the preflight first: `{self.command(plan, cmd)}`"
            )
        return check_gate(
            plan,
            self.passed(plan),
            skip=cmd.skip_preflight,
            skipper=user,
            command=self.command(plan, cmd),
        )

    @staticmethod
    def command(plan: Plan, cmd: RunCommand) -> str:
        """The `/finetune preflight` that would validate this plan."""
        return preflight_command(plan, dict(cmd.overrides), dict(cmd.written))
