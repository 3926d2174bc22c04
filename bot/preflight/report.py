"""A preflight's report as a thread post: one line per check, pass or fail, with its evidence (pure)."""

from __future__ import annotations

from typing import Any

from bot.slack.blocks import cap_blocks, context, escape, header, section, sections

CHECK_TITLES = {
    "memory": "Memory",
    "communication": "Communication",
    "checkpoint_recovery": "Checkpoint recovery",
    "launcher": "Launcher distributes",
}


def missing_report(status: str) -> dict[str, Any]:
    """The report of a preflight job that ended without writing one: every check not run, and why."""
    reason = f"the preflight job ended `{status}` before writing its report: see its logs (`Logs` on its card)"
    return {
        "version": 1,
        "passed": False,
        "lines": [{"name": name, "ok": None, "summary": reason} for name in CHECK_TITLES],
    }


def memory_refused_report(summary: str, fitting: list[str]) -> dict[str, Any]:
    """The report of a preflight refused before submission: the estimate does not fit the presets."""
    hint = f"; it fits on preset={fitting[0]}" if fitting else ""
    lines: list[dict[str, Any]] = [
        {"name": "memory", "ok": False, "summary": f"estimate does not fit: {summary}{hint}"}
    ]
    lines += [
        {"name": name, "ok": None, "summary": "not run: the memory estimate already fails, nothing was submitted"}
        for name in CHECK_TITLES
        if name != "memory"
    ]
    return {"version": 1, "passed": False, "lines": lines}


def render_report(report: dict[str, Any], *, recipe: str, run_command: str) -> tuple[str, list[dict[str, Any]]]:
    """Fallback text and blocks: the verdict, each check with its evidence, and what to do next."""
    passed = bool(report.get("passed"))
    verdict = ":white_check_mark: *Preflight passed*" if passed else ":x: *Preflight failed*"
    wall = report.get("wall_s")
    if isinstance(wall, int | float):
        verdict += f" in {wall:.0f} s"
    world = report.get("expected_world_size")
    if world:
        verdict += f" · {escape(str(world))} ranks"
    lines = []
    for line in report.get("lines") or []:
        ok = line.get("ok")
        mark = ":white_check_mark:" if ok is True else ":x:" if ok is False else ":heavy_minus_sign:"
        title = CHECK_TITLES.get(str(line.get("name")), str(line.get("name")))
        lines.append(f"{mark} *{escape(title)}* — {escape(str(line.get('summary', '')))}")
    blocks: list[dict[str, Any]] = [header(f"Preflight: {recipe}"), section(verdict)]
    blocks += sections("*Checks*", lines or ["no checks reported"])
    if passed:
        blocks.append(context(f"Distributed runs of these pins and presets are unlocked: `{escape(run_command)}`"))
    else:
        blocks.append(context("Fix what failed and run the preflight again; the run stays refused until one passes."))
    text = escape(f"Preflight of {recipe}: {'passed' if passed else 'failed'}")
    return text, cap_blocks(blocks, "…report truncated to fit Slack's 50-block limit.")
