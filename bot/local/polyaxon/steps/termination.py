"""What Kubernetes holds of a job that a process on this host does not: the Job's deadline and the main container's
termination message, as kubelet reads it when the container ends.

kubelet (pkg/kubelet/kuberuntime/kuberuntime_container.go, `getTerminationMessage` and
`readLastStringFromContainerLogs`) takes the last 4096 bytes of the file at `terminationMessagePath`; with
`terminationMessagePolicy: FallbackToLogsOnError`, a container that exited non-zero and wrote nothing there gets
the last 80 lines of its log, at most 2048 bytes, instead. The operator relays that message with the failed pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

FALLBACK_TO_LOGS = "FallbackToLogsOnError"
MAX_MESSAGE_BYTES = 4096  # kubelet: MaxContainerTerminationMessageLength
MAX_LOG_BYTES = 2048  # kubelet: MaxContainerTerminationMessageLogLength
MAX_LOG_LINES = 80  # kubelet: MaxContainerTerminationMessageLogLines
# Where the job writes its termination message: kubelet mounts /dev/termination-log in a pod; here each job has
# its own file, named to it by this variable (the trainer reads it, `trainer/termination.py`).
PATH_ENV = "FINETUNE_TERMINATION_LOG"


@dataclass(frozen=True)
class PodSpec:
    """The parts of the converted pod the local executor acts on."""

    # `termination.timeout` (the Job's activeDeadlineSeconds): the Job fails with DeadlineExceeded after it.
    deadline_s: float | None = None
    # The main container's `terminationMessagePolicy` (File, Kubernetes' default, or FallbackToLogsOnError).
    message_policy: str = "File"


def pod_spec(content: str) -> PodSpec:
    """The deadline and the main container's message policy of a compiled operation (the agent's `content`)."""
    from polyaxon._polyaxonfile import CompiledOperationSpecification

    compiled = CompiledOperationSpecification.read(content)
    timeout = compiled.termination.timeout if compiled.termination is not None else None
    container = getattr(compiled.run, "container", None)
    policy = getattr(container, "termination_message_policy", None) if container is not None else None
    return PodSpec(deadline_s=float(timeout) if timeout else None, message_policy=str(policy or "File"))


def termination_message(path: Path, *, policy: str, code: int | None, tail: Sequence[str]) -> str:
    """The container's termination message as kubelet reads it (empty when there is none)."""
    try:
        data = path.read_bytes()[-MAX_MESSAGE_BYTES:]
    except OSError:
        data = b""
    said = data.decode("utf-8", errors="replace").strip()
    if said or policy != FALLBACK_TO_LOGS or not code:
        return said
    lines = "\n".join(list(tail)[-MAX_LOG_LINES:]).encode()[-MAX_LOG_BYTES:]
    return lines.decode("utf-8", errors="replace").strip()
