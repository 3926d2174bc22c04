"""The preflight's phases: launch torchrun for each, in order, and turn what they leave behind into report lines.

a. communication (`trainer.commcheck`), b. reference (2k uninterrupted steps, checkpoint every k),
c. interrupted (the same, every rank held after checkpoint-k, then SIGKILLed; a torn checkpoint-(k+1) is
made), d. resumed (`--resume_from=latest`), then e. memory and f. launcher from the reference's probes.
The child trainer runs never track into the preflight's Polyaxon run: their environment has no
`POLYAXON_RUN*` variables, and `--report_to=none`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.checkpoints import META_FILE
from trainer.commcheck import COMM_FILE
from trainer.digests import MANIFEST_FILE
from trainer.launches import Launch, LaunchResult, Rendezvous
from trainer.preflight_checks import (
    Line,
    check_communication,
    check_launcher,
    check_memory,
    check_recovery,
    error_line,
    not_run,
    read_losses,
    read_probes,
    read_resumed_from,
)
from trainer.probe import HOLD_AT_ENV, PREFLIGHT_DIR_ENV

FAULT_ENV = "FINETUNE_PREFLIGHT_FAULT"
FAULT_TORN_RESUME = "torn-resume"
STARTUP_MARGIN_S = 30.0
# What the work dir holds; only these are removed before a preflight (never the folder itself).
WORK_ENTRIES = ("comm", "logs", "reference", "resume", "probe-reference", "probe-interrupted", "probe-resumed")
WORK_FILES = ("reference.jsonl", "interrupted.jsonl", "resumed.jsonl")


@dataclass(frozen=True)
class PhaseSettings:
    """What the phases need from the command line."""

    rendezvous: Rendezvous
    expected_world_size: int
    steps: int
    comm_timeout_s: float
    phase_timeout_s: float
    memory_estimate_bytes: int
    memory_limit_bytes: int
    loss_tolerance: float
    work_dir: Path
    fault: str = ""


def child_env(env: Mapping[str, str], package_root: Path, **extra: str) -> dict[str, str]:
    """The environment of a child launch: no Polyaxon run to track into, no inherited preflight hooks, the
    trainer package importable."""
    dropped = (PREFLIGHT_DIR_ENV, HOLD_AT_ENV, FAULT_ENV)
    child = {k: v for k, v in env.items() if not k.startswith("POLYAXON_RUN") and k not in dropped}
    child["PYTHONPATH"] = ":".join(p for p in (str(package_root), env.get("PYTHONPATH", "")) if p)
    child.update(extra)
    return child


def trainer_flags(user_flags: list[str], *, steps: int, output_dir: Path, metrics: Path, resume: str) -> list[str]:
    """The user's trainer flags, then the preflight's (argparse keeps the last value of a repeated flag)."""
    return [
        *user_flags,
        f"--max_steps={2 * steps}",
        "--save_strategy=steps",
        f"--save_steps={steps}",
        "--logging_strategy=steps",
        "--logging_steps=1",
        "--eval_strategy=no",  # the eval contract is not part of the preflight: no dataset, no evaluation
        "--eval_dataset_name=",
        "--eval_contract_hash=",
        "--load_best_model_at_end=False",
        "--keep_best_checkpoint=False",
        "--save_total_limit=0",
        "--report_to=none",
        f"--output_dir={output_dir}",
        f"--metrics_jsonl={metrics}",
        f"--resume_from={resume}",
    ]


def tear_checkpoint(checkpoint: Path, torn: Path) -> None:
    """Copy a checkpoint to `torn` as a kill during its save leaves it: no manifest or marker, optimizer cut."""
    shutil.copytree(checkpoint, torn)
    for name in (META_FILE, MANIFEST_FILE):
        (torn / name).unlink(missing_ok=True)
    optimizer = torn / "optimizer.pt"
    if optimizer.is_file():
        with optimizer.open("r+b") as handle:
            handle.truncate(optimizer.stat().st_size // 2)


class Phases:
    """Runs the phases of one node's preflight in order; `run()` returns the report lines."""

    def __init__(self, settings: PhaseSettings, user_flags: list[str], env: Mapping[str, str]) -> None:
        self.settings = settings
        self.user_flags = user_flags
        self.env = env
        self.work = settings.work_dir
        self.package_root = Path(__file__).resolve().parents[1]

    def prepare(self) -> None:
        """Make the work dir and (on node 0) remove what an earlier preflight left in it."""
        self.work.mkdir(parents=True, exist_ok=True)
        if self.settings.rendezvous.node_rank != 0:
            return
        for name in WORK_ENTRIES:
            shutil.rmtree(self.work / name, ignore_errors=True)
        for name in WORK_FILES:
            (self.work / name).unlink(missing_ok=True)

    def run(self) -> list[Line]:
        """Run every phase that can run; lines in the order communication, recovery, memory, launcher."""
        self.prepare()
        communication = self.communication()
        if communication.ok is not True:
            reason = "the ranks could not communicate"
            names = ("checkpoint_recovery", "memory", "launcher")
            return [communication, *(not_run(n, reason) for n in names)]
        reference = self.train("reference", resume="")
        probes = read_probes(self.work / "probe-reference")
        recovery = self.recovery() if reference.ok else self.failed("reference", reference)
        reason = "the reference run wrote no probe files"
        memory = self.memory(probes) if probes else not_run("memory", reason)
        launcher = (
            check_launcher(probes, self.settings.expected_world_size, self.required_ranks())
            if probes
            else not_run("launcher", reason)
        )
        return [communication, recovery, memory, launcher]

    def required_ranks(self) -> list[int]:
        """The ranks whose probe files must be there: all of them on one node, this node's ranks otherwise."""
        rdzv = self.settings.rendezvous
        return list(range(self.settings.expected_world_size)) if rdzv.nnodes == 1 else rdzv.local_ranks

    def communication(self) -> Line:
        """Phase a: torchrun `trainer.commcheck`, killed whole when it outlives the comm timeout + startup."""
        rdzv, out = self.settings.rendezvous, self.work / "comm"
        timeout = self.settings.comm_timeout_s + STARTUP_MARGIN_S
        command = [
            *rdzv.torchrun(),
            "-m",
            "trainer.commcheck",
            f"--out={out}",
            f"--timeout_s={self.settings.comm_timeout_s}",
        ]
        result = self.launch("communication", command, {}, timeout)
        comm = _read_json(out / COMM_FILE)
        line = check_communication(
            comm,
            arrived=len(list(out.glob("arrived-rank-*"))),
            launched=rdzv.world_size,
            nnodes=rdzv.nnodes,
            nproc=rdzv.nproc_per_node,
            waited_s=result.wall_s,
            returncode=result.returncode,
            error=error_line(result.log_text()) if not result.ok else "",
        )
        return self.with_leftovers(line, result)

    def trainer_command(self, name: str, resume: str) -> tuple[list[str], dict[str, str]]:
        """torchrun of the trainer to 2k steps for phase `name` (reference, interrupted, resumed), and its env."""
        folder = self.work / ("reference" if name == "reference" else "resume")
        flags = trainer_flags(
            self.user_flags,
            steps=self.settings.steps,
            output_dir=folder,
            metrics=self.work / f"{name}.jsonl",
            resume=resume,
        )
        command = [*self.settings.rendezvous.torchrun(), "-m", "trainer", *flags]
        return command, {PREFLIGHT_DIR_ENV: str(self.work / f"probe-{name}")}

    def train(self, name: str, *, resume: str) -> LaunchResult:
        """Phases b and d: the reference run (into `reference`) or the resumed one (into `resume`)."""
        command, extra = self.trainer_command(name, resume)
        return self.launch(name, command, extra, self.settings.phase_timeout_s)

    def recovery(self) -> Line:
        """Phases c and d: kill every rank right after checkpoint-k, tear checkpoint-(k+1), resume, compare."""
        k, rdzv = self.settings.steps, self.settings.rendezvous
        probe_dir = self.work / "probe-interrupted"
        command, extra = self.trainer_command("interrupted", resume="")
        extra[HOLD_AT_ENV] = str(k)

        def all_held() -> bool:
            return all((probe_dir / f"held-rank-{r}").exists() for r in rdzv.local_ranks)

        launch = self.start("interrupted", command, extra)
        ended = launch.wait_until(self.settings.phase_timeout_s, all_held)
        if ended is not None:
            return self.failed("interrupted", ended, f"ended before every rank held at step {k}")
        killed = launch.kill()
        print(f"preflight: interrupted: every rank held at step {k}; killed after {killed.wall_s:.1f} s", flush=True)
        if killed.left_behind:
            return Line("checkpoint_recovery", False, f"processes survived the kill: {killed.left_behind}")
        checkpoint = self.work / "resume" / f"checkpoint-{k}"
        if rdzv.node_rank == 0:
            tear_checkpoint(checkpoint, self.work / "resume" / f"checkpoint-{k + 1}")
            if self.settings.fault == FAULT_TORN_RESUME:
                (checkpoint / META_FILE).unlink(missing_ok=True)
        resumed = self.train("resumed", resume="latest")
        if not resumed.ok:
            return self.failed("resumed", resumed)
        line = check_recovery(
            read_losses(self.work / "reference.jsonl"),
            read_losses(self.work / "resumed.jsonl"),
            steps=k,
            resumed_from=read_resumed_from(self.work / "resumed.jsonl"),
            tolerance=self.settings.loss_tolerance,
        )
        return self.with_leftovers(line, resumed)

    def memory(self, probes: list[dict[str, Any]]) -> Line:
        """Phase e: the reference's per-rank peaks against the estimate and the limit."""
        return check_memory(probes, self.settings.memory_estimate_bytes, self.settings.memory_limit_bytes)

    def failed(self, phase: str, result: LaunchResult, what: str = "") -> Line:
        """The recovery line when one of its launches failed, quoting the launch's own error line."""
        how = "timed out" if result.timed_out else f"exit {result.returncode}"
        summary = f"the {phase} run {what or 'failed'} ({how}): {error_line(result.log_text())}"
        details = {"phase": phase, "returncode": result.returncode, "log": str(result.log)}
        return Line("checkpoint_recovery", False, summary, details)

    def with_leftovers(self, line: Line, result: LaunchResult) -> Line:
        """Fail a line whose launch left processes behind."""
        if not result.left_behind:
            return line
        summary = f"{line.summary}; processes left behind: {result.left_behind}"
        return Line(line.name, False, summary, {**line.details, "left_behind": result.left_behind})

    def start(self, phase: str, command: list[str], extra: dict[str, str]) -> Launch:
        """Start one launch in its own session, its output in `logs/<phase>.log`."""
        print(f"preflight: {phase}: {' '.join(command)}", flush=True)
        env = child_env(self.env, self.package_root, **extra)
        return Launch(command, self.work / "logs" / f"{phase}.log", env)

    def launch(self, phase: str, command: list[str], extra: dict[str, str], timeout_s: float) -> LaunchResult:
        """Start a launch and wait for it (killed whole at the timeout)."""
        result = self.start(phase, command, extra).wait(timeout_s)
        how = "timed out" if result.timed_out else f"exit {result.returncode}"
        print(f"preflight: {phase}: {how} after {result.wall_s:.1f} s", flush=True)
        return result


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None
