"""The statuses a run reports: starting, running, then succeeded, failed or stopped with a reason."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from polyaxon._schemas.lifecycle import V1Statuses

from bot.local.polyaxon.steps.job import Job

# The executor's logger: these lines keep the name they had in the agent's log.
_log = logging.getLogger("bot.local.polyaxon.executor")

REASON = "LocalAgent"

StatusReporter = Callable[[str, str, str, str, str, str | None], None]
"""report(owner, project, run_uuid, status, reason, message)."""


@dataclass(frozen=True)
class Outcome:
    """A run's final status and the message that explains it."""

    status: str
    message: str
    reason: str = REASON


NOT_STARTED = Outcome(V1Statuses.FAILED, "The run did not start.")
STOPPED_BEFORE_START = Outcome(V1Statuses.STOPPED, "Stopped before start.")


def init_failed(step: str | None, code: int | None) -> Outcome:
    """An init step exited non-zero: the main container never starts."""
    return Outcome(V1Statuses.FAILED, f"Init step {step} exited with code {code}.")


def finished(code: int | None, *, stopped: bool, tail: Iterable[str]) -> Outcome:
    """The main container exited: stopped on request, succeeded, preempted, or failed with its last log lines.

    A negative code is Popen's "killed by signal N": the job's process was signalled by something outside it
    (the job's own `exit 137`, or a shell reporting a killed child, is a positive code). With no stop asked,
    that is this host's stand-in for a preemption or a lost node on a cluster: the kubelet or the node going
    away kills the pod's processes the same way, and Polyaxon marks the run failed with the reason.
    """
    if stopped:
        return Outcome(V1Statuses.STOPPED, f"Stopped (exit code {code}).")
    if code == 0:
        return Outcome(V1Statuses.SUCCEEDED, "Exit code 0.")
    if code is not None and code < 0:
        name = _signal_name(-code)
        return Outcome(
            V1Statuses.FAILED,
            f"Preempted: the job's process was killed by {name} from outside the job (no stop was asked). "
            f"Exit code {code}.",
            reason="Preempted",
        )
    return Outcome(V1Statuses.FAILED, f"Exit code {code}. Last log lines:\n" + "\n".join(tail))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def executor_failed(exc: Exception) -> Outcome:
    """Something in this executor failed: the run still ends in a final status."""
    return Outcome(V1Statuses.FAILED, f"Local executor error: {exc!r}")


def report_progress(report: StatusReporter, job: Job, status: str) -> None:
    """Report `starting` or `running`."""
    report(job.owner, job.project, job.uuid, status, REASON, None)


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
