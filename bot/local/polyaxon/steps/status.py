"""The statuses a run reports, in the words Polyaxon's Kubernetes operator and agent use for the same events.

On a cluster the operator writes starting, a `warning` while the pod's init containers run (kubelet's Ready
condition, relayed), running and succeeded as `OperatorController`, and a failed Job as the Job condition's reason
and message with the failed pod's main container appended; a stop ends in the operator's finalizer. The table of
who writes what, with file and line in their sources, is in `docs/local-polyaxon.md`; the bot reads these words
in `bot.failures.cluster`.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass

from polyaxon._schemas.lifecycle import V1Statuses

from bot.local.polyaxon.steps.job import Job

# The executor's logger: these lines keep the name they had in the agent's log.
_log = logging.getLogger("bot.local.polyaxon.executor")

# mloperator api/v1/condition.go: LogStarting, LogRunning, LogSucceeded (reason and message).
OPERATOR = "OperatorController"
STARTING = "Operation is starting"
RUNNING = "Operation is running"
SUCCEEDED = "Operation has succeeded"
# mloperator internal/helpers/managers/pods.go HasUnschedulablePods: a pod that is not Running yet, whose Ready
# condition kubelet sets False with reason ContainersNotReady (kubelet/status/generate.go) while its init
# containers run; Polyaxon's pod has the main container and the sidecar.
POD_STARTING_REASON = "ContainersNotReady"
POD_STARTING = "containers with unready status: [polyaxon-main polyaxon-sidecar]"
# The Job's own failure conditions (kubernetes pkg/controller/job/job_controller.go), which the operator copies.
BACKOFF_LIMIT = "BackoffLimitExceeded"
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE = "DeadlineExceeded"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
# mloperator internal/controller/job/finalizer.go: a stopped run's last word.
FINALIZER = "OperatorFinalizer"
STOPPED_MESSAGE = "Operation stopped in finalizer"
# Polyaxon's agent (polyaxon/_runner/agent/client.py log_run_failed, log_run_stopped).
AGENT = "AgentLogger"
AGENT_FAILED = "Agent failed deploying run.\n"
AGENT_STOPPED = "Run was not found. The agent assumed it was already stopped."
# kubelet/status/status_manager.go TerminatePod: the container of a pod whose node went away.
LOST_CONTAINER = "ContainerStatusUnknown"
LOST_MESSAGE = "The container could not be located when the pod was terminated"

StatusReporter = Callable[[str, str, str, str, str, str | None], None]
"""report(owner, project, run_uuid, status, reason, message)."""


@dataclass(frozen=True)
class Outcome:
    """A run's final status, its reason and the message that explains it."""

    status: str
    message: str
    reason: str


NOT_STARTED = Outcome(V1Statuses.FAILED, AGENT_FAILED + "error: the run did not start", AGENT)
STOPPED_BEFORE_START = Outcome(V1Statuses.STOPPED, STOPPED_MESSAGE, FINALIZER)
# A job whose process is gone after the agent restarted: on a cluster, a pod whose node went away.
LOST = Outcome(
    V1Statuses.FAILED,
    f"{BACKOFF_LIMIT_MESSAGE} (Pod: <reason: {LOST_CONTAINER}ExitCode 137, message {LOST_MESSAGE})",
    BACKOFF_LIMIT,
)


def with_pod(job_message: str, container_reason: str, code: int, said: str) -> str:
    """The Job's message with the failed pod's main container, as the operator appends it (api/v1/condition.go
    GetFailureMessage: only when the container's termination message is not empty)."""
    if not said.strip():
        return job_message
    return f"{job_message} (Pod: <reason: {container_reason}ExitCode {code}, message {said})"


def init_failed() -> Outcome:
    """An init step exited non-zero: the pod failed before its main container ran; the Job says its backoff limit
    (the pod's message is empty, so the operator appends nothing; the init step's log says why)."""
    return Outcome(V1Statuses.FAILED, BACKOFF_LIMIT_MESSAGE, BACKOFF_LIMIT)


def finished(code: int | None, *, stopped: bool, deadline: bool, said: str) -> Outcome:
    """The main container exited: stopped on request, past the Job's deadline, succeeded, or failed.

    `said` is the container's termination message as kubelet reads it (`steps.termination`). A negative code is
    Popen's "killed by signal N": the job's process was signalled by something outside it (the job's own
    `exit 137`, or a shell reporting a killed child, is a positive code). With no stop asked, that is this host's
    stand-in for a preemption or a drained node on a cluster: the container ends `Error` with 128 + N, where the
    kernel's OOM killer would have made it `OOMKilled`.
    """
    if stopped:
        return Outcome(V1Statuses.STOPPED, STOPPED_MESSAGE, FINALIZER)
    if deadline:
        return Outcome(V1Statuses.FAILED, DEADLINE_MESSAGE, DEADLINE)
    if code == 0:
        return Outcome(V1Statuses.SUCCEEDED, SUCCEEDED, OPERATOR)
    exit_code = 128 - code if code is not None and code < 0 else code
    if exit_code is None:
        return Outcome(V1Statuses.FAILED, BACKOFF_LIMIT_MESSAGE, BACKOFF_LIMIT)
    if code is not None and code < 0:
        _log.info("run's process was killed by %s from outside", _signal_name(-code))
    return Outcome(V1Statuses.FAILED, with_pod(BACKOFF_LIMIT_MESSAGE, "Error", exit_code, said), BACKOFF_LIMIT)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def executor_failed(exc: Exception) -> Outcome:
    """Something in this executor failed: the run still ends in a final status (the agent's own words)."""
    return Outcome(V1Statuses.FAILED, f"{AGENT_FAILED}error: {exc!r}", AGENT)


def report_progress(report: StatusReporter, job: Job, status: str) -> None:
    """Report `starting` or `running`, as the operator does."""
    message = STARTING if status == V1Statuses.STARTING else RUNNING
    report(job.owner, job.project, job.uuid, status, OPERATOR, message)


def report_pod_starting(report: StatusReporter, job: Job) -> None:
    """The pod exists and its containers are not ready (its init steps run): the operator's routine warning."""
    report(job.owner, job.project, job.uuid, V1Statuses.WARNING, POD_STARTING_REASON, POD_STARTING)


def report_final(report: StatusReporter, job: Job, outcome: Outcome) -> None:
    """Report the final status; a failure is logged, as the run is over either way."""
    try:
        report(job.owner, job.project, job.uuid, outcome.status, outcome.reason, outcome.message)
    except Exception:
        _log.exception("could not report status %s for run %s", outcome.status, job.uuid)


def current(job: Job) -> str:
    """The run's status as far as the executor knows: running until its process is done."""
    if not job.done.is_set():
        return V1Statuses.RUNNING
    return V1Statuses.SUCCEEDED if job.proc and job.proc.returncode == 0 else V1Statuses.FAILED
