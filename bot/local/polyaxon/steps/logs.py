"""The run's logs: JSON lines (Polyaxon's `V1Log`) in the store, and the tail kept for a failure message."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import IO

from traceml.logging.schemas import V1Log

from bot.local.polyaxon.steps.job import Job


def write_line(job: Job, log_file: IO[bytes], container: str, text: str) -> None:
    """Append one line of a container's output to the run's log file and its tail."""
    line = V1Log.model_construct(
        timestamp=datetime.now(UTC), node="local", pod=job.uuid, container=container, value=text
    )
    with job.log_lock:
        log_file.write((line.to_json() + "\n").encode())
        log_file.flush()
        job.tail.append(text)


def note(job: Job, message: str) -> None:
    """Add the executor's own line to the tail (not to the log file)."""
    job.tail.append(message)
