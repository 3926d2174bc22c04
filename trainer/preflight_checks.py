"""The preflight's decisions: from what its phases left behind to one report line each, and the report.

Pure functions over plain data (and small readers of the files the phases write), so every verdict is
tested without launching anything. A line's `ok` is True (passed), False (failed) or None (not run:
an earlier phase failed); the report passes only when every line passed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPORT_VERSION = 1
MEMORY_TOLERANCE = 0.20  # a measured GPU peak may exceed the estimate by this fraction
_RANK_PREFIX = re.compile(r"^\[(?:default)?rank\d+\]:\s*")
_EXCEPTION = re.compile(r"^[\w.]*(?:Error|Exception|Interrupt)\b[^:]*:")


@dataclass(frozen=True)
class Line:
    """One line of the report: a named check, its verdict, one line of evidence and the numbers behind it."""

    name: str
    ok: bool | None
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The line as the report holds it."""
        return {"name": self.name, "ok": self.ok, "summary": self.summary, "details": self.details}


def not_run(name: str, reason: str) -> Line:
    """A line whose phase could not run because an earlier one failed."""
    return Line(name, None, f"not run: {reason}")


def human_bytes(n: float) -> str:
    """Bytes in binary units, three significant digits (`1.5 GiB`)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def relative_difference(reference: float, other: float) -> float:
    """|reference - other| / |reference| (absolute difference when the reference is 0)."""
    scale = abs(reference)
    return abs(reference - other) / scale if scale > 0 else abs(reference - other)


def check_communication(
    comm: dict[str, Any] | None,
    *,
    arrived: int,
    launched: int,
    nnodes: int,
    nproc: int,
    waited_s: float,
    returncode: int | None,
    error: str = "",
) -> Line:
    """The communication line from `comm.json` (None when rank 0 never wrote it) and how the launch ended."""
    seen = list(comm.get("ranks_seen") or []) if comm else []
    if len(seen) < launched:
        answered = max(len(seen), arrived)
        summary = (
            f"{answered} of {launched} ranks answered within {waited_s:.0f} s (the rendezvous waited for "
            f"nodes/processes that never joined: expected {nnodes}×{nproc})"
        )
        if returncode not in (None, 0) and arrived >= launched and error:
            summary = f"all {launched} ranks started but the collectives failed (exit {returncode}): {error}"
        return Line("communication", False, summary, {"arrived": arrived, "launched": launched, "error": error})
    assert comm is not None
    hosts = sorted({str(r.get("hostname")) for r in seen})
    sizes = ", ".join(
        f"{human_bytes(s['bytes'])} {s['latency_ms']:.3g} ms ({s['busbw_gbps']:.3g} GB/s)" for s in comm["sizes"]
    )
    summary = (
        f"{len(seen)} ranks on {len(hosts)} host{'s' if len(hosts) != 1 else ''} answered ({comm.get('backend')}); "
        f"all-reduce latency (bus bandwidth): {sizes}"
    )
    return Line("communication", True, summary, {**comm, "hosts": hosts})


def check_launcher(probes: list[dict[str, Any]], expected_world_size: int, required_ranks: list[int]) -> Line:
    """The launcher line: every required rank wrote a probe, and each saw the expected world size."""
    details: dict[str, Any] = {
        "expected_world_size": expected_world_size,
        "ranks": [
            {k: p.get(k) for k in ("rank", "hostname", "world_size", "per_device_train_batch_size", "global_batch")}
            for p in sorted(probes, key=lambda p: int(p.get("rank", 0)))
        ],
    }
    sizes = sorted({int(p.get("world_size", 0)) for p in probes})
    if expected_world_size > 1 and sizes == [1]:
        summary = f"the script did not distribute: world size 1 inside the job, expected {expected_world_size}"
        return Line("launcher", False, summary, details)
    if sizes and sizes != [expected_world_size]:
        got = ", ".join(str(s) for s in sizes)
        return Line("launcher", False, f"world size {got} inside the job, expected {expected_world_size}", details)
    seen = sorted({int(p.get("rank", -1)) for p in probes})
    missing = sorted(set(required_ranks) - set(seen))
    if missing or not probes:
        summary = f"{len(seen)} of {len(required_ranks)} ranks reported (missing ranks {missing})"
        return Line("launcher", False, summary, details)
    batches = sorted({(p["per_device_train_batch_size"], p["gradient_accumulation_steps"]) for p in probes})
    global_batches = sorted({int(p["global_batch"]) for p in probes})
    per_device, accumulation = batches[0]
    summary = (
        f"{len(seen)} ranks, each with world size {expected_world_size}; per-device batch {per_device} × "
        f"gradient accumulation {accumulation} × {expected_world_size} = global batch {global_batches[0]}"
    )
    ok = len(batches) == 1 and len(global_batches) == 1
    if not ok:
        summary = f"ranks disagree on the batch: per-device/accumulation {batches}, global {global_batches}"
    return Line("launcher", ok, summary, details)


def check_memory(probes: list[dict[str, Any]], estimate_bytes: int, limit_bytes: int) -> Line:
    """The memory line: the highest per-rank peak against the estimate (GPU) and the limit.

    On GPU the peak is `torch.cuda.max_memory_allocated()`, compared with the estimate (over by more than
    20 % fails) and the limit. On CPU it is the process's peak RSS, which includes the Python/torch runtime:
    it is compared with the limit only, the estimate shown beside it.
    """
    on_gpu = any(p.get("device") == "cuda" and p.get("cuda_peak_bytes") is not None for p in probes)
    key = "cuda_peak_bytes" if on_gpu else "peak_rss_bytes"
    peaks = {int(p["rank"]): int(p.get(key) or 0) for p in probes}
    rank, peak = max(peaks.items(), key=lambda item: item[1])
    details = {
        "measure": "cuda_max_memory_allocated" if on_gpu else "peak_rss",
        "peak_bytes_by_rank": {str(r): v for r, v in sorted(peaks.items())},
        "peak_bytes": peak,
        "estimate_bytes": estimate_bytes,
        "limit_bytes": limit_bytes,
    }
    what = "GPU memory allocated" if on_gpu else "RSS (includes the Python/torch runtime)"
    parts = [f"peak {what} {human_bytes(peak)} on rank {rank}"]
    failures = []
    if estimate_bytes > 0:
        over = peak / estimate_bytes - 1
        parts.append(f"estimate {human_bytes(estimate_bytes)} ({over:+.0%})")
        if on_gpu and over > MEMORY_TOLERANCE:
            failures.append(f"{over:.0%} over the estimate (tolerance {MEMORY_TOLERANCE:.0%})")
        elif not on_gpu:
            parts[-1] += ", not compared on CPU"
    if limit_bytes > 0:
        parts.append(f"limit {human_bytes(limit_bytes)} per process")
        if peak > limit_bytes:
            failures.append("over the limit")
    if estimate_bytes <= 0 and limit_bytes <= 0:
        parts.append("no estimate or limit given: nothing to compare")
    summary = "; ".join(parts) + (f": {', '.join(failures)}" if failures else "")
    return Line("memory", not failures, summary, details)


def check_recovery(
    reference: dict[int, float],
    resumed: dict[int, float],
    *,
    steps: int,
    resumed_from: str | None,
    tolerance: float,
) -> Line:
    """The checkpoint recovery line: the resume started from `checkpoint-<steps>` (not the torn folder after
    it) and its train loss at every step steps+1..2·steps equals the uninterrupted run's within `tolerance`."""
    expected = f"checkpoint-{steps}"
    compared = list(range(steps + 1, 2 * steps + 1))
    differences = {
        s: relative_difference(reference[s], resumed[s]) for s in compared if s in reference and s in resumed
    }
    details: dict[str, Any] = {
        "resumed_from": resumed_from,
        "torn": f"checkpoint-{steps + 1}",
        "steps_compared": compared,
        "reference_loss": {str(s): reference.get(s) for s in compared},
        "resumed_loss": {str(s): resumed.get(s) for s in compared},
        "max_relative_difference": max(differences.values(), default=None),
        "tolerance": tolerance,
    }
    if resumed_from != expected:
        summary = f"resumed from {resumed_from or 'nothing'}, expected {expected} (the torn checkpoint must be skipped)"
        return Line("checkpoint_recovery", False, summary, details)
    missing = [s for s in compared if s not in differences]
    if missing:
        return Line("checkpoint_recovery", False, f"no train loss logged at steps {missing} of a run", details)
    worst = max(differences, key=lambda s: differences[s])
    if differences[worst] > tolerance:
        summary = (
            f"train loss after resuming from {expected} differs at step {worst}: {resumed[worst]:.6g} vs "
            f"{reference[worst]:.6g} uninterrupted (relative difference {differences[worst]:.2e} > {tolerance:g})"
        )
        return Line("checkpoint_recovery", False, summary, details)
    summary = (
        f"killed after {expected}, resumed from it past the torn checkpoint-{steps + 1}; train loss at steps "
        f"{compared[0]}..{compared[-1]} matches the uninterrupted run (max relative difference "
        f"{differences[worst]:.2e} <= {tolerance:g})"
    )
    return Line("checkpoint_recovery", True, summary, details)


def build_report(lines: list[Line], wall_s: float, expected_world_size: int) -> dict[str, Any]:
    """The report document: passed only when every line passed."""
    return {
        "version": REPORT_VERSION,
        "passed": bool(lines) and all(line.ok is True for line in lines),
        "wall_s": round(wall_s, 2),
        "expected_world_size": expected_world_size,
        "lines": [line.to_json() for line in lines],
    }


def render_report(report: dict[str, Any]) -> list[str]:
    """The report as log lines: a verdict, then one line per check."""
    verdict = "PASSED" if report["passed"] else "FAILED"
    out = [f"preflight {verdict} in {report['wall_s']:.1f} s (expected world size {report['expected_world_size']})"]
    for line in report["lines"]:
        mark = {True: "ok", False: "FAIL", None: "-"}[line["ok"]]
        out.append(f"[{mark}] {line['name']}: {line['summary']}")
    return out


def read_losses(path: Path) -> dict[int, float]:
    """Map global step -> train loss from a trainer's JSONL tracking file (a torn last line is ignored)."""
    losses: dict[int, float] = {}
    for record in _records(path):
        metrics = record.get("metrics") or {}
        if record.get("kind") == "metrics" and "loss" in metrics:
            losses[int(record["step"])] = float(metrics["loss"])
    return losses


def read_resumed_from(path: Path) -> str | None:
    """The checkpoint a run says it resumed from (its `resumed_from_checkpoint` output), or None."""
    found = None
    for record in _records(path):
        if record.get("kind") == "outputs" and "resumed_from_checkpoint" in record.get("outputs", {}):
            found = str(record["outputs"]["resumed_from_checkpoint"])
    return found


def read_probes(folder: Path) -> list[dict[str, Any]]:
    """The `rank-<N>.json` probe files a run's ranks wrote."""
    probes = []
    for path in sorted(folder.glob("rank-*.json")):
        try:
            probes.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return probes


def error_line(log: str) -> str:
    """The line of a failed launch's log that says why: the trainer's refusal to resume, else its last logged
    error, else the last exception line (torchrun's own ChildFailedError says nothing), else the last line."""
    lines = [_RANK_PREFIX.sub("", line).strip() for line in log.splitlines()]
    for line in lines:
        if "cannot resume:" in line:
            return line[line.index("cannot resume:") :]
    logged = [line for line in lines if " ERROR " in line]
    if logged:
        return logged[-1]
    raised = [line for line in lines if _EXCEPTION.match(line) and "ChildFailedError" not in line]
    if raised:
        return raised[-1]
    return next((line for line in reversed(lines) if line), "")


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records
