"""A process executor for Polyaxon's agent loop: what the k8s operator and sidecar do, on this host.

Polyaxon 2.18's own `polyaxon._local_process.executor` builds `docker run` command lines; this one
keeps Polyaxon's converter (environment, init steps) and runs the containers' commands as local
process groups. The image field is ignored.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from polyaxon._local_process import process_types
from polyaxon._local_process.converter.converters import CONVERTERS
from polyaxon._local_process.converter.mixins import MIXIN_MAPPING
from polyaxon._runner.executor import BaseExecutor
from polyaxon._runner.kinds import RunnerKind
from polyaxon._schemas.lifecycle import V1Statuses
from polyaxon.exceptions import PolyaxonAgentError
from traceml.logging.schemas import V1Log

from bot.local.polyaxon.config import AgentSettings
from bot.local.polyaxon.procs import group_alive, kill_group, start_ticks

_log = logging.getLogger(__name__)

# Job environment variables taken from the agent's own environment (everything else is dropped,
# as a pod does not inherit its node's environment).
_PASSTHROUGH_NAMES = {"LANG", "LC_ALL", "TZ", "TERM", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"}
_PASSTHROUGH_PREFIXES = ("HF_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH_", "PYTORCH_", "LC_")
_BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

StatusReporter = Callable[[str, str, str, str, str, str | None], None]
"""report(owner, project, run_uuid, status, reason, message)."""

SummarySyncer = Callable[[str, str, str, Path, datetime | None], None]
"""sync(owner, project, run_uuid, run_path, last_check): summaries of run_path/events and /resources."""


@dataclass
class _Job:
    owner: str
    project: str
    uuid: str
    containers: list[process_types.V1Container]
    thread: threading.Thread | None = None
    proc: subprocess.Popen[bytes] | None = None
    stop_requested: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    log_lock: threading.Lock = field(default_factory=threading.Lock)
    readers: list[threading.Thread] = field(default_factory=list)


def write_shims(shim_dir: Path, python: str) -> None:
    """Write `python` and `python3` wrappers that exec the configured interpreter."""
    shim_dir.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        shim = shim_dir / name
        # A wrapper script, not a symlink: a symlink to a venv's python outside the venv folder
        # would lose the venv (Python looks for pyvenv.cfg next to the path it was started as).
        shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
        shim.chmod(0o755)


# Logs live in the store only; an auto-resume init step copies them into the context folder and
# they must not be mirrored back over the live file.
MIRROR_EXCLUDE = (".git", "plxlogs", ".tmpplxlogs")


def mirror_tree(src: Path, dst: Path, exclude: Iterable[str] = MIRROR_EXCLUDE) -> int:
    """Copy new or changed files from `src` into `dst` (what the sidecar's artifact sync does)."""
    if not src.is_dir():
        return 0
    excluded = set(exclude)
    copied = 0
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in excluded]
        target_root = dst / Path(root).relative_to(src)
        for name in files:
            source = Path(root) / name
            target = target_root / name
            try:
                st = source.stat()
                if target.exists():
                    tt = target.stat()
                    if tt.st_size == st.st_size and tt.st_mtime_ns == st.st_mtime_ns:
                        continue
                target_root.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                copied += 1
            except FileNotFoundError:
                # A file removed while we walk (a checkpoint rotated away) is not an error.
                continue
    return copied


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


class LocalProcessExecutor(BaseExecutor):
    """Runs a converted Polyaxon job as local process groups and reports its lifecycle."""

    MIXIN_MAPPING = MIXIN_MAPPING
    CONVERTERS = cast(dict[str, Any], CONVERTERS)
    RUNNER_KIND = RunnerKind.PROCESS

    def __init__(
        self,
        settings: AgentSettings,
        report: StatusReporter,
        sync_summaries: SummarySyncer,
    ) -> None:
        super().__init__()
        self._settings = settings
        self._layout = settings.layout
        self._report = report
        self._sync_summaries = sync_summaries
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        for folder in (self._layout.jobs, self._layout.homes, self._layout.context_root):
            folder.mkdir(parents=True, exist_ok=True)
        write_shims(self._layout.shims, settings.python)

    # BaseExecutor API -----------------------------------------------------------------------

    def _get_manager(self) -> Any:
        return _NoManager()

    def create(
        self,
        run_uuid: str,
        run_kind: str,
        resource: list[process_types.V1Container],
        namespace: str | None = None,
        owner: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """Start a run in a thread of its own; the agent's pool must not block on it."""
        with self._lock:
            if run_uuid in self._jobs and not self._jobs[run_uuid].done.is_set():
                return {"status": V1Statuses.RUNNING}
            job = _Job(
                owner=owner or self._settings.owner,
                project=project or "",
                uuid=run_uuid,
                containers=list(resource),
            )
            job.thread = threading.Thread(target=self._run_job, args=(job,), name=f"job-{run_uuid[:8]}")
            self._jobs[run_uuid] = job
        job.thread.start()
        return {"status": V1Statuses.STARTING}

    def apply(self, run_uuid: str, run_kind: str, resource: Any, namespace: str | None = None) -> Any:
        """Changing a live run is not supported by local processes."""
        raise PolyaxonAgentError(f"The local process agent cannot apply changes to run {run_uuid}.")

    def stop(self, run_uuid: str, run_kind: str, namespace: str | None = None) -> None:
        """SIGTERM the run's process group, SIGKILL after the grace period; the job reports `stopped`."""
        with self._lock:
            job = self._jobs.get(run_uuid)
        if job is None or job.done.is_set():
            # Queued-but-not-started, finished, or lost in an agent restart: nothing to kill.
            raise RunNotFoundError(run_uuid)
        if job.stop_requested.is_set():
            return
        job.stop_requested.set()
        self._terminate(job)

    def clean(self, run_uuid: str, run_kind: str, namespace: str | None = None) -> None:
        """Nothing to clean up for a process beyond what `stop` does."""

    def get(self, run_uuid: str, run_kind: str, namespace: str | None = None) -> str:
        """The run's status as far as this executor knows."""
        with self._lock:
            job = self._jobs.get(run_uuid)
        if job is None:
            raise RunNotFoundError(run_uuid)
        if not job.done.is_set():
            return V1Statuses.RUNNING
        return V1Statuses.SUCCEEDED if job.proc and job.proc.returncode == 0 else V1Statuses.FAILED

    def list_ops(self, namespace: str | None = None) -> list[Any]:
        """Reconciliation is not used by the base (non-managed) agent."""
        return []

    # Own API --------------------------------------------------------------------------------

    def active_runs(self) -> list[str]:
        """Uuids of runs whose processes are still alive."""
        with self._lock:
            return [uuid for uuid, job in self._jobs.items() if not job.done.is_set()]

    def shutdown(self, reason: str = "LocalAgentShutdown") -> None:
        """Stop every live run (SIGTERM, then SIGKILL after the grace period) and wait for them."""
        with self._lock:
            jobs = [job for job in self._jobs.values() if not job.done.is_set()]
        for job in jobs:
            job.stop_requested.set()
        threads = [threading.Thread(target=self._terminate, args=(job,)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for job in jobs:
            job.done.wait(timeout=self._settings.stop_grace_s + 15)

    # Internals ------------------------------------------------------------------------------

    def _terminate(self, job: _Job) -> None:
        proc = job.proc
        if proc is None:
            # Still in an init step or not started: the job thread checks the flag before each step.
            return
        kill_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._settings.stop_grace_s
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_alive(proc.pid):
                return
            time.sleep(0.1)
        _log.warning("run %s ignored SIGTERM for %.0f s: SIGKILL", job.uuid, self._settings.stop_grace_s)
        kill_group(proc.pid, signal.SIGKILL)

    def _job_env(
        self, job: _Job, container: process_types.V1Container, home: Path, *, init_step: bool
    ) -> dict[str, str]:
        env = {
            name: value
            for name, value in os.environ.items()
            if name in _PASSTHROUGH_NAMES or name.startswith(_PASSTHROUGH_PREFIXES)
        }
        python_dir = str(Path(self._settings.python).parent)
        env.update(
            {
                "PATH": os.pathsep.join([str(self._layout.shims), python_dir, _BASE_PATH]),
                "HOME": str(home),
                "PYTHONPATH": self._settings.workdir,
                "PYTHONUNBUFFERED": "1",
                "POLYAXON_CONTEXT_ROOT": str(self._layout.context_root),
            }
        )
        env.update(self._settings.extra_env)
        env.update(_env_list_to_dict(container.env))
        # Jobs read Polyaxon settings from the environment (POLYAXON_HOST, POLYAXON_RUN_INSTANCE);
        # POLYAXON_NO_CONFIG=true would make tracking fall back to localhost:8000, so it is
        # removed and the clean HOME is what keeps them off any user config.
        env.pop("POLYAXON_NO_CONFIG", None)
        # Polyaxon's process converter sets this so that tracking runs its own sidecar thread,
        # captures stdout and posts statuses from inside the job. This executor is the sidecar
        # (logs, artifacts, summaries, statuses), as on Kubernetes, so the job must not race it.
        env.pop("POLYAXON_HAS_PROCESS_SIDECAR", None)
        env["POLYAXON_HOST"] = self._settings.host
        if init_step:
            # `polyaxon initializer ...` only exists when the CLI runs as the init service.
            env["POLYAXON_SERVICE"] = "init"
        return env

    def _run_job(self, job: _Job) -> None:
        store_run = self._layout.store / job.uuid
        context_run = self._layout.context_root / "artifacts" / job.uuid
        home = self._layout.homes / job.uuid
        log_path = store_run / "plxlogs" / "logs.jsonl"
        status, reason, message = V1Statuses.FAILED, "LocalAgent", "The run did not start."
        last_check: datetime | None = None
        try:
            for folder in (log_path.parent, context_run / "outputs", home):
                folder.mkdir(parents=True, exist_ok=True)
            self._report(job.owner, job.project, job.uuid, V1Statuses.STARTING, "LocalAgent", None)
            *init_steps, main = job.containers
            with log_path.open("ab") as log_file:
                for step in init_steps:
                    if job.stop_requested.is_set():
                        break
                    code = self._run_process(job, step, home, log_file, wait=True, init_step=True)
                    if code != 0 and job.stop_requested.is_set():
                        break
                    if code != 0:
                        status = V1Statuses.FAILED
                        message = f"Init step {step.name} exited with code {code}."
                        self._append_tail(message, job)
                        return
                if job.stop_requested.is_set():
                    status, reason, message = V1Statuses.STOPPED, "LocalAgent", "Stopped before start."
                    return
                self._report(job.owner, job.project, job.uuid, V1Statuses.RUNNING, "LocalAgent", None)
                self._run_process(job, main, home, log_file, wait=False, init_step=False)
                assert job.proc is not None
                while True:
                    try:
                        job.proc.wait(timeout=self._settings.sync_interval_s)
                        break
                    except subprocess.TimeoutExpired:
                        last_check = self._sync(job, context_run, store_run, last_check)
                code = job.proc.returncode
                self._drain(job)
            if job.stop_requested.is_set():
                status, reason, message = V1Statuses.STOPPED, "LocalAgent", f"Stopped (exit code {code})."
            elif code == 0:
                status, reason, message = V1Statuses.SUCCEEDED, "LocalAgent", "Exit code 0."
            else:
                status = V1Statuses.FAILED
                message = f"Exit code {code}. Last log lines:\n" + "\n".join(job.tail)
        except Exception as exc:  # the run must end in a final status whatever went wrong here
            _log.exception("run %s failed in the local executor", job.uuid)
            status, message = V1Statuses.FAILED, f"Local executor error: {exc!r}"
        finally:
            if job.proc is not None and group_alive(job.proc.pid):
                kill_group(job.proc.pid, signal.SIGKILL)
            # Final sync over everything (last_check=None): the backstop for tracking writes
            # that did not land while the run was alive.
            try:
                self._sync(job, context_run, store_run, None)
            except Exception:
                _log.exception("final sync of run %s failed", job.uuid)
            try:
                self._report(job.owner, job.project, job.uuid, status, reason, message)
            except Exception:
                _log.exception("could not report status %s for run %s", status, job.uuid)
            (self._layout.jobs / f"{job.uuid}.json").unlink(missing_ok=True)
            shutil.rmtree(home, ignore_errors=True)
            job.done.set()

    def _sync(self, job: _Job, context_run: Path, store_run: Path, last_check: datetime | None) -> datetime:
        started = datetime.now(UTC)
        mirror_tree(context_run, store_run)
        try:
            self._sync_summaries(job.owner, job.project, job.uuid, store_run, last_check)
        except Exception as exc:
            _log.info("events summaries of run %s not synced yet: %r", job.uuid, exc)
            return last_check or started
        return started

    def _run_process(
        self,
        job: _Job,
        container: process_types.V1Container,
        home: Path,
        log_file: IO[bytes],
        *,
        wait: bool,
        init_step: bool,
    ) -> int | None:
        argv = [str(part) for part in (container.command or []) + (container.args or [])]
        if not argv:
            raise PolyaxonAgentError(f"Container {container.name} has no command.")
        cwd = container.working_dir or self._settings.workdir
        _log.info("run %s, step %s: %s", job.uuid, container.name, argv)
        proc = subprocess.Popen(
            argv,
            env=self._job_env(job, container, home, init_step=init_step),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # One pipe for both streams keeps their lines in the order the job wrote them.
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop kills the whole tree
            close_fds=True,
        )
        record = {
            "pgid": proc.pid,
            "start_ticks": start_ticks(proc.pid),
            "owner": job.owner,
            "project": job.project,
            "container": container.name,
        }
        (self._layout.jobs / f"{job.uuid}.json").write_text(json.dumps(record))
        name = container.name or "main"
        readers = [threading.Thread(target=self._pump, args=(job, proc.stdout, name, log_file), daemon=True)]
        for reader in readers:
            reader.start()
        job.proc = proc
        job.readers.extend(readers)
        if job.stop_requested.is_set():
            # A stop that arrived between the flag check and the spawn would miss this process.
            threading.Thread(target=self._terminate, args=(job,), daemon=True).start()
        if not wait:
            return None
        code = proc.wait()
        self._drain(job)
        return code

    def _drain(self, job: _Job) -> None:
        for reader in job.readers:
            reader.join(timeout=5)
        job.readers.clear()

    def _pump(self, job: _Job, stream: IO[bytes] | None, container: str, log_file: IO[bytes]) -> None:
        if stream is None:
            return
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not text.strip():
                continue
            line = V1Log.model_construct(
                timestamp=datetime.now(UTC), node="local", pod=job.uuid, container=container, value=text
            )
            with job.log_lock:
                log_file.write((line.to_json() + "\n").encode())
                log_file.flush()
                job.tail.append(text)
        stream.close()

    @staticmethod
    def _append_tail(message: str, job: _Job) -> None:
        job.tail.append(message)


class RunNotFoundError(Exception):
    """The executor holds no live process for this run."""


class _NoManager:
    """Stands where the k8s executor has its cluster manager (only `get_version` is asked)."""

    def get_version(self) -> dict[str, str]:
        return {"kind": "local-process"}
