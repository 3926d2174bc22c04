"""The job's last word to Kubernetes: one line in its container's termination message.

kubelet reads the file at the container's `terminationMessagePath` (`/dev/termination-log`, which it mounts in
every container) when the container ends and keeps its last 4096 bytes in the pod's status; Polyaxon's operator
relays it with a failed Job (`(Pod: <reason: ErrorExitCode 1, message …)`), so the bot can name the cause even
when the log is gone. The shipped components also set `terminationMessagePolicy: FallbackToLogsOnError`, so a
container killed before it could write (an OOM kill) still leaves its log's last lines there. Stdlib only: it runs
before anything heavy is imported and must never be the reason a job fails.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Where the bot's local agent (which stands in for kubelet) wants it; unset on a cluster.
PATH_ENV = "FINETUNE_TERMINATION_LOG"
KUBERNETES_PATH = Path("/dev/termination-log")
MAX_BYTES = 4096  # kubelet keeps at most this much (the end of the file)


def termination_log() -> Path | None:
    """Where the message goes: the local agent's file, else Kubernetes' when it is mounted; None outside both."""
    named = os.environ.get(PATH_ENV)
    if named:
        return Path(named)
    return KUBERNETES_PATH if KUBERNETES_PATH.exists() else None


def tell(text: str) -> None:
    """Write `text` as the termination message (replacing an earlier one); never raises."""
    path = termination_log()
    if path is None:
        return
    data = " ".join(text.split()).encode("utf-8", errors="replace")[: MAX_BYTES - 1]
    # A read-only or missing mount: the log's last lines are the fallback.
    with contextlib.suppress(OSError):
        path.write_bytes(data + b"\n")


def describe(exc: BaseException) -> str:
    """The exception as a traceback's last line says it (`torch.OutOfMemoryError: CUDA out of memory. …`)."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


@contextmanager
def last_word() -> Iterator[None]:
    """Around a job's main: an exception that ends it is told as its termination message, then raised on."""
    try:
        yield
    except SystemExit:
        raise  # an exit code the job chose: it told why itself (or its log's last lines will)
    except BaseException as exc:
        tell(describe(exc))
        raise
