"""A container as a local process group: spawn it, pump its output into the log, terminate it."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from polyaxon._local_process import process_types
from polyaxon.exceptions import PolyaxonAgentError

from bot.local.polyaxon.procs import die_with_parent, group_alive, kill_group, start_ticks
from bot.local.polyaxon.steps import logs
from bot.local.polyaxon.steps.forked import ForkServers
from bot.local.polyaxon.steps.job import Job, JobProcess

# The executor's logger: these lines keep the name they had in the agent's log.
_log = logging.getLogger("bot.local.polyaxon.executor")


def command(container: process_types.V1Container) -> list[str]:
    """The container's command line (command, then args)."""
    argv = [str(part) for part in (container.command or []) + (container.args or [])]
    if not argv:
        raise PolyaxonAgentError(f"Container {container.name} has no command.")
    return argv


def run(
    job: Job,
    container: process_types.V1Container,
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    log_file: IO[bytes],
    record: Path,
    grace_s: float,
    wait: bool,
    forks: ForkServers | None = None,
) -> int | None:
    """Start `argv` in a process group of its own, recorded in `record`; its exit code when `wait`.

    A Python job whose environment a fork server preloaded is forked from it (`steps.forked`), else started fresh.
    """
    proc: JobProcess | None = forks.start(argv, env, cwd) if forks is not None else None
    _log.info("run %s, step %s%s: %s", job.uuid, container.name, " (forked)" if proc else "", argv)
    if proc is None:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # One pipe for both streams keeps their lines in the order the job wrote them.
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop kills the whole tree
            # The job thread waits on this process, so the job dies with the agent, not with a thread that ended.
            preexec_fn=die_with_parent(),
            close_fds=True,
        )
    entry = {
        "pgid": proc.pid,
        "start_ticks": start_ticks(proc.pid),
        "owner": job.owner,
        "project": job.project,
        "container": container.name,
    }
    record.write_text(json.dumps(entry))
    name = container.name or "main"
    stdout: IO[bytes] | None = proc.stdout
    readers = [threading.Thread(target=pump, args=(job, stdout, name, log_file), daemon=True)]
    for reader in readers:
        reader.start()
    job.proc = proc
    job.readers.extend(readers)
    if job.stop_requested.is_set():
        # A stop that arrived between the flag check and the spawn would miss this process.
        threading.Thread(target=terminate, args=(job, grace_s), daemon=True).start()
    if not wait:
        return None
    code = proc.wait()
    drain(job)
    return code


def pump(job: Job, stream: IO[bytes] | None, container: str, log_file: IO[bytes]) -> None:
    """Copy a process's output, line by line, into the run's log until the stream closes."""
    if stream is None:
        return
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", errors="replace").rstrip("\n")
        if not text.strip():
            continue
        logs.write_line(job, log_file, container, text)
    stream.close()


def drain(job: Job) -> None:
    """Wait for the output pumps to reach the end of their streams."""
    for reader in job.readers:
        reader.join(timeout=5)
    job.readers.clear()


def terminate(job: Job, grace_s: float) -> None:
    """SIGTERM the job's process group, SIGKILL after `grace_s`."""
    proc = job.proc
    if proc is None:
        # Still in an init step or not started: the job thread checks the flag before each step.
        return
    kill_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_alive(proc.pid):
            return
        time.sleep(0.1)
    _log.warning("run %s ignored SIGTERM for %.0f s: SIGKILL", job.uuid, grace_s)
    kill_group(proc.pid, signal.SIGKILL)


def kill_leftovers(job: Job) -> None:
    """SIGKILL whatever is left of the job's last process group."""
    if job.proc is not None and group_alive(job.proc.pid):
        kill_group(job.proc.pid, signal.SIGKILL)
