"""Why a run failed, as a class with evidence, from its status conditions, exit code and last log lines. Pure.

What Kubernetes, Polyaxon and the training stack say when a job dies is scattered over three places: the
status conditions (`OOMKilled`, `Evicted`, `ImagePullBackOff`, `DeadlineExceeded`, a preemption), the exit code
(137 is SIGKILL, 143 SIGTERM, 127 a missing command) and the last log lines (a CUDA OOM, a 401 from a hub,
a NaN loss, a Python traceback). The order below is the order of trust: what the cluster says about the pod
(over the run's whole last episode, its most specific cause first: bot.failures.cluster), then specific log
signatures (in the log tail and in the container's termination message the operator relays), then a traceback's
exception line, then the bare exit code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.failures.cluster import TRACEBACK, Condition, cluster_cause, relayed_container


@dataclass(frozen=True)
class Failure:
    """A failure's class (`oom_cuda`, `preempted`, …), the line that shows it, and the exit code if known."""

    kind: str
    evidence: str
    exit_code: int | None = None


# Class -> its title on the card and in the thread.
TITLES = {
    "oom_host": "Out of memory (host)",
    "oom_cuda": "Out of GPU memory",
    "preempted": "Preempted",
    "node_lost": "Node lost",
    "image": "Image error",
    "dependency": "Dependency error",
    "data": "Data or access error",
    "nan": "Diverged (NaN)",
    "timeout": "Timed out",
    "unschedulable": "Could not be scheduled",
    "code": "Code error",
    "start_deadline": "Did not start in time",
    "unsupported": "Not runnable on this deployment",
    "refused": "Ended before it logged",
    "unknown": "Failed",
}

_EXIT_CODE = re.compile(r"exit(?:ed)?(?: with)? code:? (-?\d+)|[A-Za-z]ExitCode (-?\d+)", re.IGNORECASE)
_SIGNAL = re.compile(r"\bsignal (SIG[A-Z]+|\d+)", re.IGNORECASE)

# Polyaxon's converter refusing the operation (`Converter Error. Specification with run kind: pytorchjob is not
# supported in this deployment version.`): the agent could not turn it into anything it can start.
_UNSUPPORTED = re.compile(r"not supported in this deployment|Converter ?Error", re.IGNORECASE)

# Signatures in the log lines, most specific first.
_LOG_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "oom_cuda",
        re.compile(
            r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|"
            r"HIP out of memory|RESOURCE_EXHAUSTED: Out of memory|NCCL .*out of memory"
        ),
    ),
    ("oom_host", re.compile(r"MemoryError\b|Cannot allocate memory|std::bad_alloc|oom-kill|Out of memory: Killed")),
    (
        "nan",
        re.compile(
            r"""['"]?(?:loss|grad_norm|train_loss|eval_loss)['"]?\s*[:=]\s*['"]?(?:nan|-?inf)\b|"""
            r"loss (?:is|became) (?:nan|inf|not finite)|non-finite (?:loss|gradient)|"
            r"Loss diverged|Detected (?:NaN|inf)",
            re.IGNORECASE,
        ),
    ),
    (
        "data",
        re.compile(
            r"\b40[134] Client Error|HTTP(?:Error)? ?40[134]|status(?: code)?[ =:]+40[134]\b|"
            r"\b(?:Unauthorized|Forbidden)\b.*(?:huggingface|hub|s3|gs://|bucket|blob)|"
            r"RepositoryNotFoundError|GatedRepoError|RevisionNotFoundError|EntryNotFoundError|"
            r"LocalEntryNotFoundError|DatasetNotFoundError|DataFilesNotFoundError|NoSuchBucket|NoSuchKey|"
            # The trainer's own: a split that is not there, rows not in the trainer's format (trainer/data.py).
            r"\bDataset(?:Row)?Error: |"
            r"AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken",
            re.IGNORECASE,
        ),
    ),
    (
        "dependency",
        re.compile(
            r"ModuleNotFoundError: No module named|ImportError: (?:cannot import name|lib\S+: cannot open)|"
            r"undefined symbol:|GLIBC_[0-9.]+' not found|requires the \S+ library but it was not found|"
            r"version conflict|incompatible with the installed|CUDA driver version is insufficient|"
            r"no kernel image is available for execution",
            re.IGNORECASE,
        ),
    ),
    (
        "timeout",
        re.compile(
            r"Watchdog caught collective operation timeout|DistStoreError: .*[Tt]imed out|"
            r"socket timeout|RendezvousTimeoutError|gloo.*[Tt]imed out",
        ),
    ),
)

# The Job's backoff limit with nothing of the failed pod appended (the operator appends it only when the container
# left a termination message).
_BARE_BACKOFF = re.compile(r"^BackoffLimitExceeded: Job has reached the specified backoff limit\.?$")
# The exception line that closes a traceback: `pkg.mod.SomeError: message`, or a bare `KeyError`.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")
# Rank tags (`[rank0]:`, `[rank1]:[E1203 …]`) and a container prefix (`main | `) in front of a log line.
_LOG_PREFIX = re.compile(r"^(?:(?:\[[^\]]*\]:?\s*)+|\S+ \| )")


def exit_code_of(conditions: Sequence[Condition]) -> int | None:
    """The exit code the failed condition reports (`Exit code 137.`), newest first; None when none says."""
    for condition in reversed(conditions):
        match = _EXIT_CODE.search(f"{condition.reason or ''} {condition.message or ''}")
        if match:
            return int(match.group(1) or match.group(2))
    return None


def classify(conditions: Sequence[Condition], lines: Sequence[str], exit_code: int | None = None) -> Failure:
    """The failure's class and the line that shows it.

    `conditions`: the run's status conditions, oldest first; `lines`: its last log lines, oldest first;
    `exit_code`: the main container's exit code when the caller knows it (else read from the conditions).
    """
    code = exit_code if exit_code is not None else exit_code_of(conditions)
    # What the cluster names, over the run's last episode: the most specific cause, and what ended it.
    cause = cluster_cause(conditions)
    if cause is not None:
        return Failure(cause.kind, _cut(cause.evidence()), code)
    # The container's termination message (the trainer's last word, or its log's last lines) is read as log.
    _, _, said = relayed_container(conditions)
    log = [_strip(line) for line in [*lines, *(said or "").splitlines()] if line.strip()]
    for kind, pattern in _LOG_RULES:
        # Where the loss first went NaN says when it diverged; for the rest the last sign is the cause.
        hit = _first_match(log, pattern) if kind == "nan" else _last_match(log, pattern)
        if hit is not None:
            return Failure(kind, _cut(hit), code)
    exception = exception_line(log)
    if exception is not None:
        return Failure("code", _cut(exception), code)
    by_code = _by_exit_code(code)
    if by_code is not None:
        return Failure(by_code[0], by_code[1], code)
    if not log:
        # Nothing logged: the run ended before its process did anything, and only Polyaxon's last status
        # condition can say why. Quoted as it is, never hidden behind "no log lines".
        said = condition_text(conditions)
        if said is not None:
            return Failure("unsupported" if _UNSUPPORTED.search(said) else "refused", _cut(said), code)
    last = log[-1] if log else "no log lines"
    ended = condition_text(conditions)
    if code is None and ended is not None and _BARE_BACKOFF.match(ended):
        # Kubernetes gave up on the Job, and Polyaxon's operator relayed no container (it does only with a
        # termination message): say so beside the log's last line.
        last = f"{last} (then {ended}, with no container reason)"
    return Failure("unknown", _cut(f"exit code {code}: {last}" if code is not None else last), code)


def condition_text(conditions: Sequence[Condition]) -> str | None:
    """`Reason: message` of the newest status condition that says something (the failed one, normally), on one
    line; a Python traceback the agent appends to its message is left out (its last line is in the message)."""
    return next((text for condition in reversed(conditions) if (text := condition.text())), None)


def exception_line(lines: Sequence[str]) -> str | None:
    """The exception line of the last Python traceback in `lines` (`ValueError: bad value`), or None."""
    start = max((i for i, line in enumerate(lines) if TRACEBACK in line), default=None)
    if start is None:
        return None
    found: str | None = None
    for line in lines[start + 1 :]:
        text = line.strip()
        if _EXCEPTION_LINE.match(text) and not line.startswith((" ", "\t")):
            found = text
    return found


def _by_exit_code(code: int | None) -> tuple[str, str] | None:
    if code is None:
        return None
    if code in (137, -9):
        # SIGKILL inside the container with no other sign: on Kubernetes and on a host, the OOM killer's mark.
        return "oom_host", f"exit code {code} (SIGKILL) with no other cause in the log: the kernel's OOM killer"
    if code in (124,):
        return "timeout", "exit code 124: a timeout ended the command"
    if code in (126, 127):
        return "image", f"exit code {code}: the command could not be run in the image (missing or not executable)"
    return None


def _last_match(lines: Iterable[str], pattern: re.Pattern[str]) -> str | None:
    hit: str | None = None
    for line in lines:
        if pattern.search(line):
            hit = line
    return hit


def _first_match(lines: Iterable[str], pattern: re.Pattern[str]) -> str | None:
    return next((line for line in lines if pattern.search(line)), None)


def _strip(line: str) -> str:
    return _LOG_PREFIX.sub("", line.rstrip())


def _cut(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
