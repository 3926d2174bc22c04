"""A process executor for Polyaxon's agent loop: what the k8s operator and sidecar do, on this host.

Polyaxon 2.18's own `polyaxon._local_process.executor` builds `docker run` command lines; this one
keeps Polyaxon's converter (environment, init steps) and runs the containers' commands as local
process groups. The image field is ignored. Each step of a run lives in `bot.local.polyaxon.steps`:
init (shims, environment, init steps), process, logs, sync and status.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from typing import IO, Any, cast

from polyaxon._local_process import process_types
from polyaxon._local_process.converter.converters import CONVERTERS
from polyaxon._local_process.converter.mixins import MIXIN_MAPPING
from polyaxon._runner.executor import BaseExecutor
from polyaxon._runner.kinds import RunnerKind
from polyaxon._schemas.lifecycle import V1Statuses
from polyaxon.exceptions import PolyaxonAgentError

from bot.local.polyaxon.config import AgentSettings
from bot.local.polyaxon.steps import process, status
from bot.local.polyaxon.steps.forked import ForkServers
from bot.local.polyaxon.steps.init import job_env, run_init_steps, write_shims
from bot.local.polyaxon.steps.job import Job, JobPaths
from bot.local.polyaxon.steps.status import StatusReporter
from bot.local.polyaxon.steps.sync import SummarySyncer, final_sync, wait_syncing
from bot.local.polyaxon.steps.termination import PATH_ENV as TERMINATION_PATH_ENV
from bot.local.polyaxon.steps.termination import PodSpec, termination_message

_log = logging.getLogger(__name__)

__all__ = ["LocalProcessExecutor", "RunNotFoundError", "StatusReporter", "SummarySyncer"]


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
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        for folder in (self._layout.jobs, self._layout.homes, self._layout.context_root):
            folder.mkdir(parents=True, exist_ok=True)
        write_shims(self._layout.shims, settings.python)
        self._forks: ForkServers | None = None
        if settings.preload:
            self._forks = ForkServers(settings.python, settings.preload, self._layout.homes)
            # A job container's environment as the converter leaves it, less the run's own POLYAXON_* variables:
            # the server for it starts now, so the stack's first Python job is forked too.
            main = process_types.V1Container(name="main")
            self._forks.warm(job_env(settings, main, self._layout.homes, init_step=False), settings.workdir)

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
        pod: PodSpec | None = None,
    ) -> dict[str, Any]:
        """Start a run in a thread of its own; the agent's pool must not block on it."""
        with self._lock:
            if run_uuid in self._jobs and not self._jobs[run_uuid].done.is_set():
                return {"status": V1Statuses.RUNNING}
            job = Job(
                owner=owner or self._settings.owner,
                project=project or "",
                uuid=run_uuid,
                containers=list(resource),
                pod=pod or PodSpec(),
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
        process.terminate(job, self._settings.stop_grace_s)

    def clean(self, run_uuid: str, run_kind: str, namespace: str | None = None) -> None:
        """Nothing to clean up for a process beyond what `stop` does."""

    def get(self, run_uuid: str, run_kind: str, namespace: str | None = None) -> str:
        """The run's status as far as this executor knows."""
        with self._lock:
            job = self._jobs.get(run_uuid)
        if job is None:
            raise RunNotFoundError(run_uuid)
        return status.current(job)

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
        grace_s = self._settings.stop_grace_s
        threads = [threading.Thread(target=process.terminate, args=(job, grace_s)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for job in jobs:
            job.done.wait(timeout=grace_s + 15)
        if self._forks is not None:
            self._forks.close()

    # Internals ------------------------------------------------------------------------------

    def _run_job(self, job: Job) -> None:
        paths = JobPaths.of(self._layout, job.uuid)
        outcome = status.NOT_STARTED
        try:
            paths.make()
            # The Job exists (starting), its pod waits on its init steps (the operator's routine warning), then the
            # main container runs; the Job's deadline counts from its start, as Kubernetes counts it.
            status.report_progress(self._report, job, V1Statuses.STARTING)
            deadline = time.monotonic() + job.pod.deadline_s if job.pod.deadline_s else None
            status.report_pod_starting(self._report, job)
            *init_steps, main = job.containers
            with paths.log.open("ab") as log_file:
                ended = run_init_steps(
                    job, init_steps, lambda step: self._run_step(job, step, paths, log_file, wait=True, init_step=True)
                )
                if ended is not None:
                    outcome = ended
                    return
                status.report_progress(self._report, job, V1Statuses.RUNNING)
                self._run_step(job, main, paths, log_file, wait=False, init_step=False)
                assert job.proc is not None
                code = wait_syncing(
                    job, job.proc, paths, self._sync_summaries, self._settings.sync_interval_s,
                    deadline=deadline, grace_s=self._settings.stop_grace_s,
                )  # fmt: skip
                process.drain(job)
            said = termination_message(paths.termination, policy=job.pod.message_policy, code=code, tail=job.tail)
            outcome = status.finished(
                code, stopped=job.stop_requested.is_set(), deadline=job.deadline_exceeded.is_set(), said=said
            )
        except Exception as exc:  # the run must end in a final status whatever went wrong here
            _log.exception("run %s failed in the local executor", job.uuid)
            outcome = status.executor_failed(exc)
        finally:
            process.kill_leftovers(job)
            final_sync(job, paths, self._sync_summaries)
            status.report_final(self._report, job, outcome)
            paths.record.unlink(missing_ok=True)
            shutil.rmtree(paths.home, ignore_errors=True)
            job.done.set()

    def _run_step(
        self,
        job: Job,
        container: process_types.V1Container,
        paths: JobPaths,
        log_file: IO[bytes],
        *,
        wait: bool,
        init_step: bool,
    ) -> int | None:
        argv = process.command(container)
        env = job_env(self._settings, container, paths.home, init_step=init_step)
        if not init_step:
            env[TERMINATION_PATH_ENV] = str(paths.termination)  # kubelet's /dev/termination-log, for this job
        return process.run(
            job,
            container,
            argv,
            env=env,
            cwd=container.working_dir or self._settings.workdir,
            log_file=log_file,
            record=paths.record,
            grace_s=self._settings.stop_grace_s,
            wait=wait,
            forks=self._forks,
        )


class RunNotFoundError(Exception):
    """The executor holds no live process for this run."""


class _NoManager:
    """Stands where the k8s executor has its cluster manager (only `get_version` is asked)."""

    def get_version(self) -> dict[str, str]:
        return {"kind": "local-process"}
