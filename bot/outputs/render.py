"""The `/finetune outputs` report as a thread post: one line per checkpoint, the model, eval results, logs."""

from __future__ import annotations

from typing import Any

from bot.outputs.inventory import FolderCheck, OutputsReport, short
from bot.slack.blocks import cap_blocks, context, escape, header, section, sections
from storage.models import Run

GIB = 1024**3


def size_text(size: int) -> str:
    """Bytes for people: `12.3 MiB`."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def folder_line(check: FolderCheck, command: str | None) -> str:
    """`• checkpoint-20 (step 20): 36.2 MiB, 9 files, sha256:… — complete, digest matches`."""
    state = "complete" if check.complete else "*partial* (" + escape(", ".join(check.missing)) + ")"
    if check.problems:
        verdict = ":x: " + escape("; ".join(p for p in check.problems if not p.startswith("missing ")) or state)
    elif check.hashed:
        verdict = ":white_check_mark: content matches the recorded digest"
    else:
        verdict = ":white_check_mark: sizes match the manifest (over the hash budget: content not re-hashed)"
    step = f" (step {check.step})" if check.step is not None else ""
    digest = short(check.store_digest or check.manifest_digest or check.recorded_digest)
    files = f"{size_text(check.size)}, {check.files} files"
    line = f"• `{escape(check.name)}`{step}: {files}, `{escape(digest)}` — {state}; {verdict}"
    if command:
        line += f"\n    `{escape(command)}`"
    return line


def render_outputs(
    report: OutputsReport, run: Run, commands: dict[str, str], url: str | None
) -> tuple[str, list[dict[str, Any]]]:
    """Fallback text and blocks of the report."""
    verdict = (
        ":white_check_mark: *Confirmed*: outputs read back from Polyaxon and checked"
        if report.confirmed
        else ":warning: *Not confirmed*"
        + ("" if report.status == "succeeded" else f": the run is {escape(report.status)}, not succeeded")
    )
    blocks: list[dict[str, Any]] = [header(f"Outputs: {run.name}"), section(verdict)]
    if report.problems:
        blocks += sections("*Problems*", [f"• {escape(p)}" for p in report.problems[:15]])
    lines = [folder_line(c, commands.get(c.name)) for c in report.checkpoints] or ["none"]
    blocks += sections("*Checkpoints*", lines)
    if report.model is not None:
        blocks += sections("*Final model* (`outputs/model`)", [folder_line(report.model, commands.get("model"))])
    else:
        blocks.append(section("*Final model*: none in `outputs/model`"))
    blocks += sections("*Eval results*", _eval_lines(report, commands.get("eval_results")))
    log_line = f"• {size_text(report.log_bytes)} of logs\n    `{escape(commands['logs'])}`"
    blocks += sections("*Logs*", [log_line])
    notes = []
    if url:
        notes.append(f"<{url}|Open in Polyaxon>")
    if report.unhashed_bytes:
        notes.append(f"{size_text(report.unhashed_bytes)} over the hash budget were checked by size only")
    notes.append("Fetch commands need the Polyaxon CLI pointed at this server (`polyaxon config set --host=…`).")
    blocks.append(context(*notes))
    text = f"Outputs of {escape(run.name)}: {'confirmed' if report.confirmed else 'not confirmed'}"
    return text, cap_blocks(blocks, "…report truncated to fit Slack's 50-block limit.")


def _eval_lines(report: OutputsReport, command: str | None) -> list[str]:
    check = report.eval
    if not check.present:
        return ["• none" + (" (the recipe has an eval contract!)" if check.expected_contract_hash else "")]
    metrics = ", ".join(f"{k}={v:.4g}" for k, v in sorted(check.metrics.items())) or "no metrics"
    verdict = ":x: " + escape("; ".join(check.problems)) if check.problems else ":white_check_mark:"
    line = f"• {escape(metrics)} · contract `{short(check.contract_hash)}` {verdict} · attached below"
    if command:
        line += f"\n    `{escape(command)}`"
    return [line]
