"""What the cluster says, read: Polyaxon's statuses and conditions as its Kubernetes agent and operator write them,
with the Job's and pod's own reasons they pass on. Pure.

Who writes what, with file and line in Polyaxon's, the operator's and Kubernetes' sources, is the table in
`docs/local-polyaxon.md`. In short: haupt writes created to scheduled (`OperationServiceInit`, `SchedulerPrepare`,
`SchedulerStart`, `AgentController`); the operator writes starting, running and succeeded as `OperatorController`,
a pod that is not ready yet as `warning` (`ImagePullBackOff` with kubelet's message, or `ContainersNotReady` with
the pod condition's message: the scheduler's "0/3 nodes are available: …" when it cannot place the pod, kubelet's
"containers with unready status: […]" while its init containers run), and a failed Job as the Job condition's own
reason and message (`BackoffLimitExceeded`, `DeadlineExceeded`, `PodFailurePolicy`) followed by the failed pod's
container state (`(Pod: <reason: OOMKilledExitCode 137, message …)`). haupt keeps only the newest of consecutive
conditions of one type, so a run's history holds each episode's last word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Condition:
    """One Polyaxon status condition (what the bot reads back from `get_run_statuses`)."""

    type: str
    reason: str | None = None
    message: str | None = None

    def text(self) -> str:
        """`Reason: message` on one line, a Python traceback the agent appends to its message left out."""
        message = (self.message or "").split(TRACEBACK, 1)[0]
        parts = [" ".join(part.split()) for part in (self.reason, message) if part and part.strip()]
        return ": ".join(parts)


TRACEBACK = "Traceback (most recent call last):"

# Statuses that say something holds the run: told whenever they carry a reason that is not routine.
PROBLEM_TYPES = frozenset({"unschedulable", "warning", "retrying"})

# Reasons written for every run as it goes through its lifecycle: never a reason to wait. (haupt's `StateManager`
# and `EventHandler` are not among them: they say someone stopped or skipped the run, in Polyaxon.)
ROUTINE_REASONS = frozenset(
    {
        "OperationServiceInit",  # haupt: created
        "ModelManager",  # haupt: created (a run without a polyaxonfile)
        "SchedulerPrepare",  # haupt: compiled
        "SchedulerStart",  # haupt: queued
        "SchedulerPipeline",  # haupt: a pipeline running
        "AgentController",  # haupt: queued inside a pipeline, scheduled
        "AgentSchedules",  # haupt: on_schedule
        "OperatorFinalizer",  # operator: stopped, in its finalizer
        "PodNotReady",  # operator: the Job has no pod yet
        "PodPending",  # operator: "Pod is still pending without conditions"
        "LocalAgent",  # the bot's former local agent, for every status it wrote
    }
)
# Families of the above, and Polyaxon's own executors', by prefix (`LocalAgent` is the bot's former local agent).
_ROUTINE_PREFIXES = ("Operation", "Scheduler", "Agent", "Polyaxon", "CliExecutor", "OfflineOperation")
# The operator's own reason: routine on starting, running and succeeded; on a warning it means a pod failed and
# Kubernetes starts another (`Underlaying job has an issue`, sic): a reason to say so.
OPERATOR = "OperatorController"
# kubelet's Ready condition while a pod's containers start (its init containers run): the operator relays it as
# `warning: ContainersNotReady` on every run. The scheduler's message under the same reason is not routine.
_POD_STARTING = re.compile(r"^containers with (?:unready|incomplete|unknown) status\b")


def routine(kind: str, reason: str | None, message: str | None) -> bool:
    """Whether a condition is a step every run goes through, not a reason to wait nor a cause."""
    if not reason:
        return not message
    if reason == OPERATOR:
        return kind not in PROBLEM_TYPES
    if reason == "ContainersNotReady":
        return bool(_POD_STARTING.match((message or "").strip()))
    return reason in ROUTINE_REASONS or reason.startswith(_ROUTINE_PREFIXES)


def informative(kind: str, reason: str | None, message: str | None) -> bool:
    """Whether a status condition says why a run waits (a scheduling problem, a pull back-off), not routine."""
    if routine(kind, reason, message):
        return False
    if kind in PROBLEM_TYPES:
        return bool(reason or message)
    return bool(reason)


class Said(Protocol):
    """What the rules read of a condition: the bot's own (`Condition`) or the gateway's (`StatusCondition`)."""

    @property
    def type(self) -> str: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def message(self) -> str | None: ...


def routine_warning(conditions: Sequence[Said]) -> bool:
    """A run whose newest condition is a routine `warning` (its pod starting): no change worth a transition."""
    if not conditions:
        return False
    newest = conditions[-1]
    return newest.type == "warning" and routine(newest.type, newest.reason, newest.message)


# Causes, most specific first: a cause the cluster names beats the limit that ended the run (an image that could
# not be pulled until the Job's deadline is an image error, not a time-out).
CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("oom_host", re.compile(r"OOMKilled|OutOfmemory|low on resource: memory", re.IGNORECASE)),
    (
        "preempted",
        re.compile(
            r"\bpreempted\b|PreemptionByScheduler|preempting to accommodate|Preempted in order to admit|"
            r"DisruptionTarget|TerminationByKubelet|imminent node shutdown|spot instance|"
            r"Taint manager: deleting|Eviction API: evicting|\bEvicted\b|node is shutting down|NodeShutdown|"
            r"low on resource: (?!memory)|The node had condition",
            re.IGNORECASE,
        ),
    ),
    (
        "node_lost",
        re.compile(
            r"NodeLost|node .*(?:lost|not ready|unreachable)|DeletionByPodGC|node no longer exists|"
            r"ContainerStatusUnknown|could not be located when the pod was|LocalAgentRestart",
            re.IGNORECASE,
        ),
    ),
    (
        "image",
        re.compile(
            r"ErrImagePull|ImagePullBackOff|InvalidImageName|ErrImageNeverPull|manifest unknown|ImageInspectError|"
            r"RegistryUnavailable|pull access denied",
            re.IGNORECASE,
        ),
    ),
    ("unschedulable", re.compile(r"\b\d+/\d+ nodes are available\b|\bUnschedulable\b|\bInsufficient \S+")),
    ("timeout", re.compile(r"DeadlineExceeded|active longer than specified deadline|timed? ?out", re.IGNORECASE)),
)
_RANK = {kind: rank for rank, (kind, _) in enumerate(CAUSES)}

# The failed pod's main container as the operator appends it to the Job's message: `(Pod: <reason:
# OOMKilledExitCode 137, message …)` (api/v1/condition.go GetFailureMessage, pods.go HasUnschedulablePods), and as
# newer operators word it (`… exit code 137 (OOMKilled): …`).
_POD_PART = re.compile(r"\(Pod: <reason: (?P<reason>[^,]*), message (?P<message>.*)\)\s*$", re.DOTALL)
_CONTAINER = re.compile(
    r"(?P<reason>[A-Za-z]+)ExitCode (?P<code>-?\d+)|exit code (?P<code2>-?\d+) \((?P<reason2>\w+)\)"
)
# A container killed by a signal from outside it: SIGKILL after the grace period, or SIGTERM it obeyed (the
# trainer's orderly stop exits 143). Kubernetes says `OOMKilled` when the kernel's OOM killer did it.
_KILLED = frozenset({137, 143})


@dataclass(frozen=True)
class Cause:
    """What the cluster says ended a run: a class, the condition that shows it, and the condition that ended it."""

    kind: str
    shown_by: str
    ended_by: str | None

    def evidence(self) -> str:
        """The cause, and the end when another condition said it (both are quoted)."""
        return self.shown_by if not self.ended_by else f"{self.shown_by} — then {self.ended_by}"


def last_episode(conditions: Sequence[Condition]) -> list[Condition]:
    """The conditions since the run last ran (all of them when it never did): what came before a run that then ran
    did not end it."""
    last_running = max((i for i, c in enumerate(conditions) if c.type == "running"), default=-1)
    return list(conditions[last_running + 1 :])


def cluster_cause(conditions: Sequence[Condition]) -> Cause | None:
    """The most specific cause the cluster names in the run's last episode, or None."""
    episode = [c for c in last_episode(conditions) if not routine(c.type, c.reason, c.message)]
    if not episode:
        return None
    terminal = episode[-1]
    best: tuple[int, int, str, Condition] | None = None
    for age, condition in enumerate(episode):
        head = _head(condition)
        kind = next((kind for kind, pattern in CAUSES if pattern.search(head)), None)
        if kind is None and _killed_from_outside(condition):
            # Nothing named (a deadline's own SIGTERM would be), and the container was signalled from outside.
            kind = "preempted"
        if kind is None:
            continue
        # Most specific first; between equals the newest.
        key = (_RANK[kind], -age, kind, condition)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        return None
    _, _, kind, shown = best
    ended = terminal.text() if shown is not terminal and terminal.type in {"failed", "stopped"} else None
    return Cause(kind, shown.text(), ended)


def relayed_container(conditions: Sequence[Condition]) -> tuple[str | None, int | None, str | None]:
    """The failed pod's main container as the operator relayed it in the newest condition that carries it: its
    termination reason (`OOMKilled`, `Error`), exit code and termination message (the trainer's own line, or the
    last of its log with `terminationMessagePolicy: FallbackToLogsOnError`)."""
    for condition in reversed(conditions):
        text = condition.message or ""
        pod = _POD_PART.search(text)
        found = _CONTAINER.search(pod.group("reason") if pod else text)
        if found is None and pod is None:
            continue
        reason = (found.group("reason") or found.group("reason2")) if found else None
        code_text = (found.group("code") or found.group("code2")) if found else None
        message = pod.group("message").strip() if pod else _after_container(text, found)
        return reason, int(code_text) if code_text is not None else None, message or None
    return None, None, None


def _killed_from_outside(condition: Condition) -> bool:
    reason, code, _ = relayed_container([condition])
    return reason == "Error" and code in _KILLED


def _after_container(text: str, found: re.Match[str] | None) -> str | None:
    if found is None:
        return None
    rest = text[found.end() :].lstrip(" :")
    return rest or None


def _head(condition: Condition) -> str:
    """The condition's reason and the first line of its message, the relayed container by its reason only: the
    container's termination message can quote log lines (FallbackToLogsOnError), which are judged as logs."""
    message = condition.message or ""
    pod = _POD_PART.search(message)
    if pod is not None:
        # `PodFailed` carries the pod's own message (an eviction's); a container's reason carries its termination
        # message, which is log.
        said = pod.group("message").split("\n", 1)[0] if pod.group("reason") == "PodFailed" else ""
        message = f"{message[: pod.start()]}(pod: {pod.group('reason')} {said})"
    text = " ".join(part for part in (condition.reason, message) if part)
    return text.split("\n", 1)[0]
