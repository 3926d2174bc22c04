"""The release path's messages: the serving check's report, the promotion request, stage changes. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from bot.registry.policy import CriterionResult
from bot.release.policy import latency_only
from bot.slack.blocks import clip, context, escape, header, mention, section, sections


def _num(value: Any, fmt: str = ".4g") -> str:
    return format(value, fmt) if isinstance(value, int | float) and not isinstance(value, bool) else "—"


def figures_line(report: Mapping[str, Any]) -> str:
    """Load time, memory, throughput and latency in one line."""
    latency = report.get("latency_ms") or {}
    return (
        f"load {_num(report.get('load_time_s'), '.2f')} s · peak memory {_num(report.get('peak_memory_mb'), '.0f')} MB"
        f" · {_num(report.get('tokens_per_s'), '.1f')} tokens/s · latency p50 {_num(latency.get('p50'), '.0f')} ms,"
        f" p95 {_num(latency.get('p95'), '.0f')} ms"
    )


def criteria_lines(results: Sequence[CriterionResult]) -> list[str]:
    """One line per criterion, pass or fail, with its evidence."""
    return [f"{':white_check_mark:' if r.passed else ':x:'} *{escape(r.name)}* — {escape(r.evidence)}" for r in results]


def render_serving_report(
    report: Mapping[str, Any],
    verdict: Sequence[CriterionResult],
    *,
    label: str,
    check_id: int,
    stage: str,
    run_name: str,
) -> tuple[str, list[dict[str, Any]]]:
    """The serving check's report as the version's thread shows it: figures, every prompt, the verdict."""
    passed = all(r.passed for r in verdict)
    title = f"Serving check #{check_id} of {label}: {'passed' if passed else 'FAILED'}"
    engine = f"{report.get('engine') or '—'} ({report.get('dtype') or '—'}, {report.get('device') or '—'})"
    prompt_set = report.get("prompt_set") or {}
    lines = [
        f"*Engine* {escape(engine)} · max new tokens {report.get('max_new_tokens') or '—'} · run `{escape(run_name)}`",
        f"*Prompt set* `{escape(str(prompt_set.get('path') or '—'))}` ({prompt_set.get('count') or 0} prompts, "
        f"`{escape(str(prompt_set.get('digest') or '—')[:19])}`)",
        f"*Figures* {figures_line(report)}",
    ]
    prompt_lines = []
    for prompt in report.get("prompts") or []:
        if not isinstance(prompt, Mapping):
            continue
        mark = ":white_check_mark:" if prompt.get("passed") else ":x:"
        failed = [c for c in prompt.get("checks") or [] if isinstance(c, Mapping) and not c.get("passed")]
        why = "; ".join(escape(f"{c.get('name')}: {c.get('evidence')}") for c in failed)
        output = escape(clip(str(prompt.get("output") or ""), 120))
        prompt_lines.append(
            f"{mark} `{escape(str(prompt.get('id')))}` {_num(prompt.get('latency_ms'), '.0f')} ms, "
            f"{escape(str(prompt.get('new_tokens') or 0))} tokens, {escape(str(prompt.get('finish_reason') or '—'))}: "
            f"“{output}”" + (f" — {why}" if why else "")
        )
    outcome = _outcome(verdict, label=label, stage=stage)
    failing = "; ".join(f"{r.name}: {r.evidence}" for r in verdict if not r.passed)
    text = f"{title}. " + outcome.replace("*", "") + (f" Failed: {failing}" if failing else "")
    blocks = [
        header(title),
        section("\n".join(lines)),
        *sections("*Prompts*", prompt_lines),
        section("*Verdict*\n" + "\n".join(criteria_lines(verdict))),
        context(outcome),
    ]
    return text, blocks


def _outcome(verdict: Sequence[CriterionResult], *, label: str, stage: str) -> str:
    """What follows the check: the request, or why the promotion is blocked and what to do about that failure."""
    if all(r.passed for r in verdict):
        return f"The approval request to promote to *{escape(stage)}* follows."
    if latency_only(verdict):
        # The model answered every prompt as expected: only the node's speed failed, twice. A new version
        # would change nothing; a quieter node or an honest budget does.
        return (
            f"*The promotion to {escape(stage)} is blocked by latency alone* (measured after a warm-up, then once "
            "more): "
            "the model answered every prompt as expected, so there is nothing to fix in it. The node was probably "
            f"busy: promote again (`/finetune promote {escape(label)} stage={escape(stage)}` starts a new check), on a "
            "quieter node if your presets can choose one, or raise `serving.budgets` in the recipe if the budget "
            "is tighter than this hardware serves."
        )
    return (
        f"*The promotion to {escape(stage)} is blocked*: the check must pass (fix the model or the serving setup, "
        "register the new version, promote again)."
    )


def render_promotion_request(
    *,
    label: str,
    stage: str,
    from_stage: str | None,
    report: Mapping[str, Any] | None,
    check_id: int | None,
    results: Sequence[CriterionResult],
    rules_source: str,
    requester: str,
    reaction: str,
    quorum: int,
    expires_at: datetime,
    digest: str,
) -> list[dict[str, Any]]:
    """The promotion approval request: the version, its serving check, the criteria, how to approve."""
    check = (
        f"*Serving check* #{check_id}: {figures_line(report)}"
        if report is not None and check_id is not None
        else "*Serving check* not required for this stage by the criteria file"
    )
    return [
        header(f"Approval request: promote {label} to {stage}"),
        section(f"*Version* {escape(label)}, now in `{escape(from_stage or 'no stage')}`\n{check}"),
        section(f"*Criteria* ({escape(rules_source)})\n" + "\n".join(criteria_lines(results))),
        context(
            f"Requested by {mention(requester)}. {quorum} approval(s) needed for {escape(stage)}: react with "
            f":{reaction}: on *this* message (approvers only; not {mention(requester)}). Removing the reaction before "
            f"the stage moves revokes it. Expires {expires_at:%Y-%m-%d %H:%M} UTC. A change of the version's stage "
            "or of its "
            f"serving check voids it. Digest `{escape(digest[7:19])}`."
        ),
    ]


def stage_change_line(
    *, at: datetime, version: str, from_stage: str, to_stage: str, kind: str, actor: str, approvers: Sequence[str]
) -> str:
    """One stage change, for the trace."""
    who = f"by {mention(actor)}" if kind in ("promote", "rollback", "rolled_back") else "automatically"
    approved = f", approved by {', '.join(mention(a) for a in approvers)}" if approvers else ""
    verb = {"promote": "promoted", "superseded": "superseded", "rollback": "restored", "rolled_back": "rolled back"}
    moved = f"`{escape(version)}` {escape(from_stage)} → {escape(to_stage)}"
    return f"• {at:%Y-%m-%d %H:%M} UTC {moved} ({escape(verb.get(kind, kind))} {who}{approved})"
