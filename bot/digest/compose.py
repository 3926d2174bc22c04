"""Digest content: plain data in, Block Kit out. Pure: no Slack, no database, no clock of its own."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from bot.health.render import TITLES
from bot.runs.kinds import trains
from bot.slack.blocks import escape, mention

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_ITEMS_PER_LIST = 10
LATE_AFTER = timedelta(minutes=5)
FINISHED_STATUSES = frozenset(
    {"succeeded", "failed", "stopped", "skipped", "upstream_failed", "done", "submit_failed", "lost"}
)


# How a run that trains nothing is marked on its line (the kinds that are not training runs).
KIND_MARKS = {"preflight": "preflight", "serving": "serving check", "eval": "evaluation"}


class DigestRun(BaseModel):
    """What a digest needs to know about one run."""

    name: str
    recipe: str
    status: str
    requester: str
    created_at: datetime
    finished_at: datetime | None = None
    link: str | None = None
    comparable: bool = True
    pinned: bool = True
    stuck: bool = False
    eval_contract_hash: str = ""
    metric_name: str | None = None
    metric_value: float | None = None
    greater_is_better: bool = False
    lineage: int = 0  # the id of the run's lineage root: a run and its resumes count once
    step: int | None = None
    max_steps: int | None = None
    # "validated" (a preflight passed), "unvalidated" (--skip-preflight) or None (a single-process run).
    validation: str | None = None
    kind: str = "train"
    confirmed: bool = False
    # A sweep's trials and best trial (what its leaderboard last showed); its trials have no line of their own.
    sweep: dict[str, Any] | None = None
    sweep_metric: str | None = None
    # Why it failed or was stopped by the bot (bot.failures): the class's title, and whether a retry took over.
    failure: str | None = None
    # The training-health alerts that fired (bot.health), by kind.
    alerts: list[str] = Field(default_factory=list)


class DigestApproval(BaseModel):
    """An approval request that waits for a decision."""

    model: str
    version: str | None = None
    run_name: str
    requester: str
    created_at: datetime
    approved_by: list[str] = Field(default_factory=list)
    quorum: int = 1
    can_still_approve: list[str] = Field(default_factory=list)
    link: str | None = None
    action: str = "register"  # register, skip_preflight, promote
    stage: str | None = None  # a promotion's target stage


class DigestRegistration(BaseModel):
    """A model version registered in the period."""

    model: str
    version: str
    run_name: str
    registered_at: datetime
    link: str | None = None


class DigestData(BaseModel):
    """Everything one digest shows: the channel's runs and requests since `since`."""

    channel: str
    since: datetime
    runs: list[DigestRun] = Field(default_factory=list)
    approvals: list[DigestApproval] = Field(default_factory=list)
    registrations: list[DigestRegistration] = Field(default_factory=list)
    scheduled_for: datetime | None = None
    timezone: str = "UTC"
    more_link: str | None = None
    # The channel's accelerator-hours this week and its top spenders (bot.usage), when there is anything.
    usage: str | None = None


def _fmt_age(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} h"
    return f"{hours // 24} d"


def _fmt_time(value: datetime, tz: str) -> str:
    from zoneinfo import ZoneInfo

    return value.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")


def _run_line(run: DigestRun) -> str:
    name = f"<{run.link}|{escape(run.name)}>" if run.link else f"`{escape(run.name)}`"
    metric = ""
    if run.metric_name and run.metric_value is not None:
        metric = f" · {escape(run.metric_name)} {run.metric_value:.4g}"
    marks = ""
    if run.kind in KIND_MARKS:
        marks += " · " + KIND_MARKS[run.kind]
    if run.kind == "sweep":
        marks += " · " + _sweep_text(run)
    if run.validation == "unvalidated":
        marks += " · :warning: *unvalidated* (preflight skipped)"
    elif run.validation == "awaiting_approval":
        # Only a run still held waits: one cancelled or expired while held ended unvalidated, asking nobody.
        held = run.status == "awaiting_approval"
        marks += " · held: preflight skip awaiting approval" if held else " · preflight skip never approved"
    elif run.validation == "validated":
        marks += " · validated"
    if run.confirmed:
        marks += " · outputs confirmed"
    return f"• {name} ({escape(run.recipe)}) by {mention(run.requester)}{metric}{marks}"


def _sweep_text(run: DigestRun) -> str:
    """`sweep: 3/3 trials done, 0 failed · best `…-t2` (lr=0.05) accuracy 0.9883`."""
    progress = run.sweep or {}
    text = (
        f"sweep: {progress.get('succeeded', 0)}/{progress.get('planned', '?')} trials done, "
        f"{progress.get('failed', 0)} failed"
    )
    top = progress.get("best")
    if isinstance(top, dict) and isinstance(top.get("metric"), int | float):
        name, values, metric = (escape(str(x)) for x in (top.get("name"), top.get("values"), run.sweep_metric))
        text += f" · best `{name}` ({values}) {metric} {float(top['metric']):.4g}"
    else:
        text += " · no trial ranked yet"
    return text


def _progress(run: DigestRun) -> str:
    if run.step is None:
        return ""
    return f" · step {run.step}" + (f"/{run.max_steps}" if run.max_steps else "")


def _section(text: str) -> dict[str, Any]:
    if len(text) > MAX_SECTION_CHARS:
        text = text[: MAX_SECTION_CHARS - 2] + " …"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _list_section(title: str, lines: list[str], more_link: str | None) -> dict[str, Any]:
    """A titled list, cut to what fits with an explicit count of what was left out."""
    shown: list[str] = []
    budget = MAX_SECTION_CHARS - len(title) - 80  # room for the "and N more" line
    for line in lines[:MAX_ITEMS_PER_LIST]:
        if sum(len(x) + 1 for x in shown) + len(line) + 1 > budget:
            break
        shown.append(line)
    text = "\n".join([title, *shown])
    left = len(lines) - len(shown)
    if left:
        more = f"<{more_link}|see the channel>" if more_link else "see `/finetune status`"
        text += f"\n…and {left} more ({more})"
    return _section(text)


def best_runs(runs: list[DigestRun]) -> list[tuple[str, str, DigestRun, int]]:
    """Best succeeded run per (recipe, eval contract) by the recipe's eval metric; never across contracts.

    A run and its resumes are one lineage: each lineage counts once, by its newest succeeded run.
    Returns (recipe, contract hash, best run, number of lineages compared), sorted by recipe.
    """
    groups: dict[tuple[str, str], dict[int, DigestRun]] = {}
    for run in runs:
        ranked = run.status == "succeeded" and run.comparable and trains(run.kind)
        if ranked and run.metric_value is not None and run.eval_contract_hash:
            lineages = groups.setdefault((run.recipe, run.eval_contract_hash), {})
            key = run.lineage or id(run)
            held = lineages.get(key)
            if held is None or (run.finished_at or run.created_at) >= (held.finished_at or held.created_at):
                lineages[key] = run
    result = []
    for (recipe, contract), by_lineage in sorted(groups.items()):
        members = list(by_lineage.values())
        pick = max if members[0].greater_is_better else min
        best = pick(members, key=lambda r: r.metric_value if r.metric_value is not None else 0.0)
        result.append((recipe, contract, best, len(members)))
    return result


def compose_digest(data: DigestData, now: datetime) -> list[dict[str, Any]]:
    """The digest's blocks: finished, failed, stopped, stuck, best per recipe, waiting decisions, unpinned."""
    tz = data.timezone
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Training digest"}},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"<#{escape(data.channel)}> since {_fmt_time(data.since, tz)}"}],
        },
    ]
    if data.scheduled_for is not None and now - data.scheduled_for > LATE_AFTER:
        blocks.append(
            _section(
                f":hourglass: This digest was due at {_fmt_time(data.scheduled_for, tz)} and is posted "
                f"{_fmt_age(now - data.scheduled_for)} late (the bot was not running then)."
            )
        )

    by_status: dict[str, list[DigestRun]] = {"succeeded": [], "failed": [], "stopped": [], "lost": []}
    for run in data.runs:
        if run.finished_at is not None and run.finished_at >= data.since and run.status in by_status:
            by_status[run.status].append(run)
    stuck = [r for r in data.runs if r.stuck and r.finished_at is None]
    going = [r for r in data.runs if r.finished_at is None and not r.stuck and r.status not in FINISHED_STATUSES]
    # Finished non-comparable runs are listed apart from the ranking; "not pinned" covers those still going.
    unpinned = [r for r in data.runs if not r.pinned and r.finished_at is None and r.created_at >= data.since]
    nothing = (
        not any(r.alerts for r in data.runs)
        and not any(by_status.values())
        and not stuck
        and not going
        and not data.approvals
        and not unpinned
        and not data.registrations
    )

    if data.usage:
        blocks.append(_section(data.usage))
    if nothing:
        blocks.append(_section(f"No runs since {_fmt_time(data.since, tz)}, and nothing waits for a decision."))
        return blocks

    titles = {
        "succeeded": ":white_check_mark: *Finished*",
        "failed": ":x: *Failed*",
        "stopped": ":octagonal_sign: *Stopped*",
        "lost": ":ghost: *Lost* (Polyaxon no longer has them)",
    }
    for status, title in titles.items():
        if by_status[status]:
            lines = [_run_line(r) + (f" — {escape(r.failure)}" if r.failure else "") for r in by_status[status]]
            blocks.append(_list_section(f"{title} ({len(lines)})", lines, data.more_link))
    if going:
        lines = [f"{_run_line(r)} — *{escape(r.status)}*{_progress(r)}" for r in going]
        blocks.append(_list_section(f":runner: *In progress* ({len(lines)})", lines, data.more_link))
    alerted = [r for r in data.runs if r.alerts and (r.finished_at is None or r.finished_at >= data.since)]
    if alerted:
        lines = [f"{_run_line(r)} — {escape(', '.join(TITLES.get(k, k) for k in r.alerts))}" for r in alerted]
        blocks.append(_list_section(f":rotating_light: *With alerts* ({len(lines)})", lines, data.more_link))
    if stuck:
        blocks.append(
            _list_section(
                f":warning: *Stuck* ({len(stuck)}) — no new log line or metric step",
                [_run_line(r) for r in stuck],
                data.more_link,
            )
        )
    if data.registrations:
        lines = []
        for reg in data.registrations:
            label = escape(f"{reg.model}:{reg.version}")
            lines.append(
                f"• {f'<{reg.link}|{label}>' if reg.link else f'`{label}`'}"
                f" from `{escape(reg.run_name)}`, {_fmt_time(reg.registered_at, tz)}"
            )
        blocks.append(_list_section(f":floppy_disk: *Registered* ({len(lines)})", lines, data.more_link))

    best = best_runs([r for r in data.runs if r.finished_at is not None and r.finished_at >= data.since])
    if best:
        lines = [
            f"• *{escape(recipe)}*: {_run_line(run)[2:]} — best of {count} on contract `{escape(contract[:12])}`"
            for recipe, contract, run, count in best
        ]
        blocks.append(
            _list_section(
                ":trophy: *Best run per recipe* (same eval contract only; a run and its resumes count once)",
                lines,
                None,
            )
        )
    # Only training runs are ranked or told non-comparable: an evaluation, a serving check or a preflight is
    # listed by its status with its kind, whatever its pins.
    non_comparable = [
        r
        for r in data.runs
        if not r.comparable and trains(r.kind) and r.finished_at is not None and r.finished_at >= data.since
    ]
    if non_comparable:
        blocks.append(
            _list_section(
                ":test_tube: *Non-comparable* (exploration without full pins, not ranked)",
                [_run_line(r) for r in non_comparable],
                data.more_link,
            )
        )

    if data.approvals:
        lines = []
        for req in data.approvals:
            target = escape(f"{req.model}:{req.version}" if req.version else req.model)
            name = f"<{req.link}|{target}>" if req.link else f"`{target}`"
            who = ", ".join(_mention(u) for u in req.can_still_approve) or "nobody left — check FINETUNE_APPROVERS"
            what = (
                f"promote {name} to *{escape(str(req.stage))}*"
                if req.action == "promote"
                else f"{name} from `{escape(req.run_name)}`"
            )
            lines.append(
                f"• {what} by {mention(req.requester)}, waiting {_fmt_age(now - req.created_at)}, "
                f"{len(req.approved_by)}/{req.quorum} approvals; can still approve: {who}"
            )
        blocks.append(
            _list_section(f":ballot_box_with_check: *Waiting for a decision* ({len(lines)})", lines, data.more_link)
        )
    if unpinned:
        blocks.append(
            _list_section(
                f":pushpin: *Not pinned* ({len(unpinned)}) — results are not comparable",
                [_run_line(r) for r in unpinned],
                data.more_link,
            )
        )
    return blocks[:MAX_BLOCKS]


def _mention(user_or_group: str) -> str:
    # FINETUNE_APPROVERS holds only U…/W…/S… ids (settings refuse anything else); escaped all the same.
    return f"<!subteam^{escape(user_or_group)}>" if user_or_group.startswith("S") else mention(user_or_group)


def digest_fallback_text(data: DigestData) -> str:
    """Plain text for notifications and clients that cannot show blocks."""
    return f"Training digest for <#{escape(data.channel)}>"
