"""`python -m trainer.preflight [options] -- [trainer flags]`: validate a distributed recipe before a real run.

One Polyaxon job (or a shell) runs this on every node with the same trainer flags `python -m trainer`
takes. It launches torchrun in phases (see `trainer.preflight_phases`): the ranks' communication
(all-gather, all-reduce latency and bus bandwidth), a reference run of 2k steps with a checkpoint every k,
the same run killed (SIGKILL, every rank) right after checkpoint-k next to a torn checkpoint-(k+1), its
resume with `--resume_from=latest` (the losses of steps k+1..2k must equal the reference's), and, from the
reference's rank probes (`trainer.probe`), the peak memory against the estimate and the limit, and the
world size and batch each rank saw.

The report, `{"version": 1, "passed", "wall_s", "expected_world_size", "lines": [{"name", "ok", "summary",
"details"}]}` with lines `communication`, `checkpoint_recovery`, `memory` and `launcher` (`ok` null: not
run), is written atomically by node 0 (default: `preflight_report.json` next to the work dir, so in the
run's outputs inside Polyaxon) and printed as the job's log. Inside Polyaxon node 0 logs the outputs
`preflight_passed`, `preflight_wall_s`, `preflight_world_size` and the report as the artifact
`preflight_report`. Exit 0 when every line passed, 1 when one did not, 2 on bad arguments.

Self-test hook: `FINETUNE_PREFLIGHT_FAULT=torn-resume` (read by this module only) also strips the completion
marker of checkpoint-k after the kill, so no complete checkpoint is left and the resume must be refused:
the checkpoint_recovery line then fails, quoting the trainer's own error line. It exists to test the checks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.digests import write_json_atomic
from trainer.launches import Rendezvous
from trainer.preflight_checks import build_report, render_report
from trainer.preflight_phases import FAULT_ENV, Phases, PhaseSettings
from trainer.tracking import polyaxon_outputs_path

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TORCHRUN_DEFAULT_PORT = 29500
REPORT_FILE = "preflight_report.json"


class UsageError(ValueError):
    """Bad preflight arguments."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _nproc(text: str) -> str:
    if text != "gpu":
        _positive_int(text)
    return text


def _env_int(env: Mapping[str, str], key: str, default: int) -> int:
    """An integer from the environment (`PET_NNODES` may be a `min:max` range: its maximum)."""
    text = env.get(key, "").split(":")[-1].strip()
    try:
        return int(text) if text else default
    except ValueError as exc:
        raise UsageError(f"{key}={env[key]!r} is not an integer") from exc


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The preflight's options; rendezvous defaults come from the operator's `PET_*` variables."""
    parser = argparse.ArgumentParser(
        prog="python -m trainer.preflight",
        usage="%(prog)s [options] -- TRAINER_FLAGS...",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--nproc_per_node", type=_nproc, default="gpu", help="processes per node: a number, or gpu (one per GPU)")
    add("--nnodes", type=_positive_int, default=_env_int(env, "PET_NNODES", 1), help="nodes (PET_NNODES)")
    add("--node_rank", type=int, default=_env_int(env, "PET_NODE_RANK", 0), help="this node (PET_NODE_RANK)")
    add("--master_addr", default=env.get("PET_MASTER_ADDR", "127.0.0.1"), help="rendezvous host (PET_MASTER_ADDR)")
    port = _env_int(env, "PET_MASTER_PORT", 0) or None
    add("--master_port", type=int, default=port, help="PET_MASTER_PORT, else a free port")
    add("--expected_world_size", type=_positive_int, required=True, help="ranks the recipe's preset starts")
    add("--steps", type=_positive_int, default=4, help="k: a checkpoint every k steps, 2k steps in all")
    add("--comm_timeout_s", type=float, default=60.0, help="process group timeout of the communication check")
    add("--phase_timeout_s", type=float, default=1800.0, help="wall limit of each training launch")
    add("--memory_estimate_bytes", type=int, default=0, help="the recipe's memory estimate per process (0: unknown)")
    add("--memory_limit_bytes", type=int, default=0, help="the preset's memory per process/accelerator (0: unknown)")
    add("--loss_tolerance", type=float, default=1e-4, help="relative tolerance of the resumed losses")
    add("--work_dir", type=Path, default=None, help="default: preflight/ in the run's outputs, else ./preflight")
    add("--report", type=Path, default=None, help=f"default: WORK_DIR/../{REPORT_FILE}")
    return parser


def parse_cli(argv: Sequence[str], env: Mapping[str, str]) -> tuple[argparse.Namespace, list[str]]:
    """Split `argv` at `--` into the preflight's options and the trainer's flags; raise UsageError when bad."""
    args = list(argv)
    if "--" not in args:
        raise UsageError("give the trainer's flags after `--` (as `python -m trainer` takes them)")
    split = args.index("--")
    options = build_parser(env).parse_args(args[:split])
    flags = args[split + 1 :]
    if not flags:
        raise UsageError("no trainer flags after `--`")
    if not 0 <= options.node_rank < options.nnodes:
        raise UsageError(f"--node_rank={options.node_rank} is not in 0..{options.nnodes - 1}")
    if options.comm_timeout_s <= 0 or options.phase_timeout_s <= 0 or options.loss_tolerance < 0:
        raise UsageError("timeouts must be positive and --loss_tolerance not negative")
    if options.memory_estimate_bytes < 0 or options.memory_limit_bytes < 0:
        raise UsageError("memory sizes must not be negative")
    return options, flags


def resolve_nproc(value: str) -> int:
    """`gpu` -> the number of visible CUDA devices (1 without any); a number as given."""
    if value != "gpu":
        return int(value)
    import torch

    return max(1, torch.cuda.device_count())


def default_work_dir(env: Mapping[str, str]) -> Path:
    """`preflight/` in the Polyaxon run's outputs inside a run (as the trainer finds them), else `./preflight`."""
    if env.get("POLYAXON_RUN_INSTANCE"):
        return polyaxon_outputs_path() / "preflight"
    return Path("preflight")


def settings_from(options: argparse.Namespace, env: Mapping[str, str]) -> PhaseSettings:
    """The phase settings the options describe."""
    port = options.master_port
    if port is None and options.nnodes > 1:
        port = TORCHRUN_DEFAULT_PORT  # every node must agree on it
    rendezvous = Rendezvous(
        nnodes=options.nnodes,
        node_rank=options.node_rank,
        master_addr=options.master_addr,
        master_port=port,
        nproc_per_node=resolve_nproc(options.nproc_per_node),
    )
    work = (options.work_dir or default_work_dir(env)).resolve()
    return PhaseSettings(
        rendezvous=rendezvous,
        expected_world_size=options.expected_world_size,
        steps=options.steps,
        comm_timeout_s=options.comm_timeout_s,
        phase_timeout_s=options.phase_timeout_s,
        memory_estimate_bytes=options.memory_estimate_bytes,
        memory_limit_bytes=options.memory_limit_bytes,
        loss_tolerance=options.loss_tolerance,
        work_dir=work,
        fault=env.get(FAULT_ENV, ""),
    )


def log_to_polyaxon(report: dict[str, Any], report_path: Path) -> None:
    """Log the verdict as outputs of the Polyaxon run this job is, and the report as its artifact."""
    from trainer.tracking import PolyaxonSink, init_polyaxon_run

    run = init_polyaxon_run()
    if run is None:
        return
    sink = PolyaxonSink(run)
    sink.log_outputs(
        {
            "preflight_passed": report["passed"],
            "preflight_wall_s": report["wall_s"],
            "preflight_world_size": report["expected_world_size"],
        }
    )
    sink.log_artifact(report_path, "preflight_report", "file")
    sink.close()


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run the preflight; return 0 when it passed, 1 when a line failed, 2 on bad arguments."""
    env = os.environ if env is None else env
    try:
        options, flags = parse_cli(sys.argv[1:] if argv is None else argv, env)
    except UsageError as exc:
        print(f"python -m trainer.preflight: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # argparse's own usage errors (and --help)
        return EXIT_USAGE if exc.code else EXIT_PASSED
    started = time.monotonic()
    settings = settings_from(options, env)
    lines = Phases(settings, flags, env).run()
    report = build_report(lines, time.monotonic() - started, settings.expected_world_size)
    print("\n".join(render_report(report)), flush=True)
    if settings.rendezvous.node_rank == 0:
        report_path = (options.report or settings.work_dir.parent / REPORT_FILE).resolve()
        report_path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(report_path, report)
        print(f"preflight report: {report_path}", flush=True)
        if env.get("POLYAXON_RUN_INSTANCE"):
            log_to_polyaxon(report, report_path)
    return EXIT_PASSED if report["passed"] else EXIT_FAILED


if __name__ == "__main__":
    from trainer.termination import last_word

    with last_word():  # an exception that ends the job is its termination message (what Kubernetes relays)
        sys.exit(main())
