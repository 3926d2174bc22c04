"""Before the main container: interpreter shims, each container's environment, and the init steps."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from polyaxon._local_process import process_types

from bot.local.polyaxon.config import AgentSettings, job_passthrough
from bot.local.polyaxon.steps import logs, status
from bot.local.polyaxon.steps.job import Job

_BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def write_shims(shim_dir: Path, python: str) -> None:
    """Write `python` and `python3` wrappers that exec the configured interpreter, and a `polyaxon` wrapper."""
    shim_dir.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        shim = shim_dir / name
        # A wrapper script, not a symlink: a symlink to a venv's python outside the venv folder
        # would lose the venv (Python looks for pyvenv.cfg next to the path it was started as).
        shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
        shim.chmod(0o755)
    shim = shim_dir / "polyaxon"
    shim.write_text(POLYAXON_SHIM.format(python=python))
    shim.chmod(0o755)


# Polyaxon's init steps call its CLI. Its auto-resume step copies a run's earlier files into the context folder and
# then runs `polyaxon initializer fswatch`, which only writes a list of those files for Polyaxon's sidecar, so that
# the sidecar does not upload them again. Here the local executor is the sidecar: it never reads that list (it
# compares sizes and times, `steps/sync.py`), and the list's place (`<context root>/artifacts/.fs`) is one file that
# every run on this host shares, each overwriting the last. So that step is answered here; it cost a cold start of
# Polyaxon's CLI per run (0.55-0.67 s of CPU, ~94 runs in the test suite). Every other call runs the CLI itself.
POLYAXON_SHIM = """#!/bin/sh
if [ "$1" = initializer ] && [ "$2" = fswatch ]; then exit 0; fi
exec "{python}" -c 'import sys; from polyaxon.cli import cli; sys.argv[0] = "polyaxon"; sys.exit(cli())' "$@"
"""  # the console script's own lines (`python -m polyaxon` would also read POLYAXON_CLI_* variables)


def _env_list_to_dict(env: Sequence[process_types.V1EnvVar] | None) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in env or []:
        value = item.get_root()
        if isinstance(value, dict):
            if "name" in value:
                result[str(value["name"])] = str(value.get("value", ""))
            else:
                result.update({str(k): str(v) for k, v in value.items()})
        else:
            result[str(value[0])] = str(value[1])
    return result


def job_env(
    settings: AgentSettings, container: process_types.V1Container, home: Path, *, init_step: bool
) -> dict[str, str]:
    """The environment a container's process starts with: a pod's, not the agent's."""
    env = job_passthrough(os.environ)
    python_dir = str(Path(settings.python).parent)
    env.update(
        {
            "PATH": os.pathsep.join([str(settings.layout.shims), python_dir, _BASE_PATH]),
            "HOME": str(home),
            "PYTHONPATH": settings.workdir,
            "PYTHONUNBUFFERED": "1",
            "POLYAXON_CONTEXT_ROOT": str(settings.layout.context_root),
        }
    )
    env.update(settings.extra_env)
    env.update(_env_list_to_dict(container.env))
    # Jobs read Polyaxon settings from the environment (POLYAXON_HOST, POLYAXON_RUN_INSTANCE);
    # POLYAXON_NO_CONFIG=true would make tracking fall back to localhost:8000, so it is
    # removed and the clean HOME is what keeps them off any user config.
    env.pop("POLYAXON_NO_CONFIG", None)
    # Polyaxon's process converter sets this so that tracking runs its own sidecar thread,
    # captures stdout and posts statuses from inside the job. This executor is the sidecar
    # (logs, artifacts, summaries, statuses), as on Kubernetes, so the job must not race it.
    env.pop("POLYAXON_HAS_PROCESS_SIDECAR", None)
    # Hugging Face libraries place their caches from HF_HOME, else from HOME, which is new for every run: one
    # cache per stack (as pods share a node's) lets a fork server's libraries serve every run (`steps.forked`).
    env.setdefault("HF_HOME", str(settings.layout.hf_home))
    # A local stack pings no one: TRL sends a usage ping at every trainer start (the TRL components set this too,
    # so a job's environment stays the one its fork server imported under).
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env["POLYAXON_HOST"] = settings.host
    if init_step:
        # `polyaxon initializer ...` only exists when the CLI runs as the init service.
        env["POLYAXON_SERVICE"] = "init"
    return env


def run_init_steps(
    job: Job,
    steps: Sequence[process_types.V1Container],
    run_step: Callable[[process_types.V1Container], int | None],
) -> status.Outcome | None:
    """Run the init steps in order; the run's outcome when it ends here (a step failed, a stop), else None."""
    for step in steps:
        if job.stop_requested.is_set():
            break
        code = run_step(step)
        if code != 0 and job.stop_requested.is_set():
            break
        if code != 0:
            logs.note(job, f"Init step {step.name} exited with code {code}.")
            return status.init_failed()
    if job.stop_requested.is_set():
        return status.STOPPED_BEFORE_START
    return None
