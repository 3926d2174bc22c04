"""What the thread, the card and the routed channel say about a run that waits too long or fails. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.failures.classify import TITLES, Failure
from bot.failures.cluster import OPERATOR
from bot.slack.blocks import escape, human_duration
from storage.models import Run

_BATCH_KEYS = ("per_device_train_batch_size", "micro_batch_size")
# kubelet's eviction for node pressure (pkg/kubelet/eviction/helpers.go): `The node was low on resource: %v. `.
_SHORT_OF = re.compile(r"low on resource: ([\w.-]+?)\.? ")
# The cluster named the disruption (a preemption, a spot reclaim, an eviction), rather than only a killed container.
_NAMED_DISRUPTION = re.compile(r"preempt|DisruptionTarget|spot|Evict|shutdown|low on resource|Taint", re.IGNORECASE)


def hint(
    failure: Failure, *, params: Mapping[str, Any], presets: Sequence[str], recipe: str, attached: bool = False
) -> str:
    """One line: what to do about this class of failure, with the run's own numbers where they help.

    `attached`: the log tail goes with the post as a file (only then may the hint point at one)."""
    batch = next((int(params[k]) for k in _BATCH_KEYS if isinstance(params.get(k), int)), None)
    smaller = f"`batch_size={max(1, batch // 2)}`" if batch and batch > 1 else "a smaller `max_length`"
    kind = failure.kind
    if kind == "oom_cuda":
        return (
            f"The GPU ran out of memory at batch size {batch or '?'}: try {smaller} (or a shorter `max_length`), "
            f"or a preset with more GPU memory; `/finetune run recipe={recipe} … --dry-run` shows the estimate."
        )
    if kind == "oom_host":
        return (
            f"The host's memory ran out (the kernel killed the process): try {smaller}, fewer dataloader workers, "
            f"or a preset with more RAM than {', '.join(presets) or 'this one'}."
        )
    if kind == "preempted":
        short = _SHORT_OF.search(failure.evidence)
        if short is not None:
            return (
                f"The node ran short of {short.group(1)} and evicted the pod: resume from the last checkpoint; if it "
                "happens again, write less to the pod's local disk or ask the platform team for a preset with more."
            )
        if _NAMED_DISRUPTION.search(failure.evidence):
            return "The cluster took the node back (spot/preemption): resume from the last checkpoint, nothing to fix."
        return (
            "Something outside the job ended its container (a preemption, an eviction or a drained node; running out "
            "of memory would say OOMKilled): resume from the last checkpoint, nothing to fix."
        )
    if kind == "node_lost":
        return "The node (or the agent running the job) went away: resume from the last checkpoint."
    if kind == "image":
        return "The image could not be pulled or started: check that the pinned digest exists and the pull secret."
    if kind == "dependency":
        return "A package is missing or incompatible in the image: rebuild the trainer image with it, then rerun."
    if kind == "data" and ("DatasetRowError" in failure.evidence or "has no split" in failure.evidence):
        return (
            "The dataset's rows (or a split file) are not what the trainer reads: fix the rows named above "
            "(`finetune-bot manifests check` names a local dataset's by file and line), then run "
            f"recipe={recipe} again."
        )
    if kind == "data":
        return (
            "A dataset, model or bucket refused access or was not found: a 401/403 means the connection's "
            "credentials, a 404 the path or the pinned revision."
        )
    if kind == "nan":
        lr = params.get("learning_rate")
        lower = f"`lr={float(lr) / 10:g}`" if isinstance(lr, int | float) and lr > 0 else "a lower learning rate"
        return f"The loss diverged: try {lower}, warmup (`warmup_ratio=0.05`), or bf16 instead of fp16."
    if kind == "unschedulable":
        return (
            "No node could take it (the scheduler's words above): choose a preset the cluster has room for "
            f"(`/finetune presets`; this run asked for {', '.join(presets) or 'its defaults'}), or ask the platform "
            "team about capacity or quota."
        )
    if kind == "timeout":
        return "A time limit ended it (the preset's timeout or a collective op): raise the limit or check the workers."
    if kind == "code":
        return "The training code raised an exception: fix it and run again (a code error is never retried)."
    if kind == "unsupported":
        return (
            "This Polyaxon deployment cannot run this kind of operation (its status condition above says which): "
            f"a distributed run needs a cluster with the training operator; `/finetune preflight recipe={recipe}` "
            "runs here."
        )
    if "BackoffLimitExceeded" in failure.evidence and "(Pod:" not in failure.evidence:
        # Kubernetes gave up on the Job and nothing said why: the container's reason (OOMKilled) reaches Polyaxon
        # only inside a termination message.
        return (
            "Kubernetes gave up on the job without a reason from its container: a component whose main container sets "
            "`terminationMessagePolicy: FallbackToLogsOnError` (the shipped ones do) lets the reason through, "
            "`OOMKilled` included. Read the log tail, and the pod's events on the cluster."
        )
    if kind == "refused":
        return "It ended before it logged a line: Polyaxon's status condition above is all there is to say why."
    where = "the log tail below and the attached file" if attached else "the log tail below"
    return f"No known cause in the last log lines: read {where}."


def failure_record(
    failure: Failure, *, hint_text: str, retry: str, why: str, next_attempt: int | None = None
) -> dict[str, Any]:
    """What the run stores in `Run.failure`."""
    record: dict[str, Any] = {
        "kind": failure.kind,
        "title": TITLES.get(failure.kind, failure.kind),
        "evidence": failure.evidence,
        "hint": hint_text,
        "exit_code": failure.exit_code,
        "retry": retry,
        "why": why,
    }
    if next_attempt is not None:
        record["next_attempt"] = next_attempt
    return record


def failed_text(record: Mapping[str, Any], *, attempt_label: str) -> str:
    """The first lines of the failed transition: the class, its evidence and the hint (the log tail follows)."""
    return (
        f":x: *failed*{attempt_label} — *{escape(str(record['title']))}*: `{escape(str(record['evidence']))}`\n"
        f":bulb: {escape(str(record['hint']))}"
    )


# Polyaxon's terminal statuses for a run that never ran, as its scheduler writes them (haupt's manager.py).
NEVER_RAN = {
    "upstream_failed": (":x:", "it never started: an operation it depends on did not succeed"),
    "skipped": (":fast_forward:", "Polyaxon skipped it: it never started"),
}


def never_ran_text(status: str, said: str | None) -> str:
    """The transition of a run Polyaxon ended before it ran, with Polyaxon's own words."""
    emoji, what = NEVER_RAN.get(status, (":grey_question:", "it ended before it started"))
    words = f" (Polyaxon: _{escape(said)}_)" if said else ""
    return f"{emoji} *{escape(status)}* — {what}{words}."


def retry_text(record: Mapping[str, Any]) -> str:
    """What the thread says about the retry decision."""
    return f":repeat: {escape(str(record['why']))}"


def waiting_text(reason: str | None, message: str | None, status: str) -> str:
    """A new status condition of a run that has not started: why it waits."""
    if reason == OPERATOR and status == "warning":
        # The operator's own warning (`Underlaying job has an issue`, sic): a pod failed and Kubernetes starts
        # another while the Job's backoff limit (the preset's maxRetries) allows.
        words = f" (the operator: _{escape(message)}_)" if message else ""
        return f":repeat: A pod of the job failed; Kubernetes starts it again within its retry limit{words}."
    what = f"*{escape(reason)}*" if reason else f"*{escape(status)}*"
    return f":hourglass: Waiting ({escape(status)}): {what}" + (f" — {escape(message)}" if message else "")


def waited_text(status: str, condition: str | None) -> str:
    """A run that waited on a problem (a warning) and moved on: the transition says what is over."""
    reason = condition.split(": ", 1)[0] if condition else ""
    if reason == OPERATOR:
        return f"Status: *{escape(status)}* — again, in a new pod"
    over = f" — no longer waiting on _{escape(reason)}_" if reason else ""
    return f"Status: *{escape(status)}*{over}"


def deadline_text(waited_s: float, limit_s: float, origin: str, condition: str | None) -> str:
    """Why the bot stopped a run that did not start in time."""
    why = f" Last condition: {escape(condition)}." if condition else ""
    return (
        f":alarm_clock: *Not started after {human_duration(waited_s)}* "
        f"(its start deadline is {human_duration(limit_s)}, "
        f"from the {escape(origin)}): stopped so it holds no place in the queue.{why} "
        "Try another preset, or ask the platform team about the queue."
    )


def routed_text(run_name: str, recipe: str, record: Mapping[str, Any], link: str | None) -> str:
    """The one line a final failure gets in the notify channel (nobody mentioned)."""
    where = f"<{link}|{escape(run_name)}>" if link else f"`{escape(run_name)}`"
    return (
        f":x: {where} (`{escape(recipe)}`) failed — *{escape(str(record['title']))}*: "
        f"`{escape(str(record['evidence']))}`"
    )


def resume_hint(run: Run) -> str:
    """How to go on from a failed or stopped run: resume from its checkpoint, or start again without one."""
    if run.checkpoint_step is not None:
        return (
            f"\nResume from its last checkpoint (step {run.checkpoint_step}) with the card's Resume button or "
            f"`/finetune resume {escape(run.name)}`."
        )
    again = "".join(f" {k}={v}" for k, v in sorted(run.overrides.items()))
    return (
        f"\nIt saved no complete checkpoint, so it can't be resumed: start again with "
        f"`/finetune run recipe={escape(run.recipe_name)}{escape(again)}`."
    )
