"""FailureService: why a run waits, why it failed, retrying it within its budget, and who hears about it.

The watcher hands it each failed run (classified from conditions, exit code and log tail; the thread gets the
class, its evidence and a hint), each run still waiting to start (new status conditions are told once; past its
start deadline it is stopped), and every tick the failed attempts whose retry is due. A retry is a child run by
the resume path (the newest complete checkpoint copied in), on the same card, under a name derived from the
first attempt and the attempt number: the database's unique (first attempt, attempt) and Polyaxon's unique name
keep the budget whatever crashes or replicas do.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.failures.classify import classify
from bot.failures.cluster import Condition
from bot.failures.policy import attempts_allowed, decide_retry
from bot.failures.render import (
    failed_text,
    failure_record,
    hint,
    never_ran_text,
    resume_hint,
    retry_text,
    routed_text,
)
from bot.failures.waiting import WaitingRuns
from bot.notify import RequesterNotifier
from bot.redact import cap_tail, redact
from bot.runs import (
    INLINE_LOG_BYTES,
    RunThread,
    checkpoint_steps,
    copy_from_checkpoint,
    inherited_fields,
    resume_patch,
    run_name_for,
)
from bot.runs.deps import RunDeps
from bot.slack.blocks import escape
from storage import repos
from storage.models import Run
from storage.repos.common import DuplicateError

if TYPE_CHECKING:
    from bot.polyaxon import RunInfo

log = logging.getLogger(__name__)

FAILED_TAIL_LINES = 400
# How far back the tick looks for failed attempts whose retry is still due (a crash between the two).
RETRY_WINDOW = timedelta(days=1)


class FailureService:
    """Explains failures, retries what the recipe allows, watches runs that have not started."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread
        # How the requester hears a run's end: the mention below, a direct message, or both (their `notify=`).
        self.notifier = RequesterNotifier(deps, thread)
        # Runs that have not started: why they wait, told once; past their start deadline, stopped.
        self.waiting = WaitingRuns(deps, thread)

    # --- a failed attempt -----------------------------------------------------------------------------

    def report_failed(self, run: Run, info: RunInfo) -> tuple[str, dict[str, Any], tuple[bytes, int] | None]:
        """The failed transition's text, the failure record to store with it, and the full tail to attach."""
        tail = self.deps.gateway.tail_logs(run.polyaxon_uuid or "", lines=FAILED_TAIL_LINES)
        lines = [redact(line.value, extra_secrets=self.deps.secrets) for line in tail.lines]
        conditions = [Condition(c.type, c.reason, c.message) for c in info.conditions]
        failure = classify(conditions, lines)
        step = max(checkpoint_steps(info.outputs), default=run.checkpoint_step)
        decision = decide_retry(run.policy, failure.kind, attempt=run.attempt, checkpoint_step=step)
        # A job writes what it likes: its lines are escaped for the message (the attached file keeps them as written).
        inline, left = cap_tail([escape(line) for line in lines], max_bytes=INLINE_LOG_BYTES)
        record = failure_record(
            failure,
            hint_text=hint(
                failure, params=run.params, presets=run.presets, recipe=run.recipe_name, attached=bool(left)
            ),
            retry=decision.retry,
            why=decision.why,
            next_attempt=decision.next_attempt,
        )
        if step is not None:
            record["checkpoint_step"] = step
        text = failed_text(record, attempt_label=self.attempt_label(run))
        # Without a log line the evidence above is Polyaxon's condition: an empty code block would only hide it.
        text += (
            f"\nLast log lines:\n```{inline}```"
            if inline
            else "\nNothing was logged: it ended before its process wrote a line."
        )
        upload = None
        if left:
            upload = ("\n".join(lines).encode(), len(lines))
            text += f"\n{left} earlier lines are in the attached file."
        if decision.retry == "due":
            text += "\n" + retry_text(record)
        else:
            text += self.with_mention("\n" + retry_text(record) + resume_hint(run), run)
        return text, record, upload

    def after_failed(self, run: Run) -> int:
        """Start the retry a failed attempt is due (now: the next tick would too), or tell the routed channel."""
        failure = run.failure or {}
        if failure.get("retry") == "due":
            return 1 if self._start_retry(run) else 0
        self._route(run)
        return 0

    def retry_due(self, now: datetime) -> tuple[int, list[str]]:
        """Failed attempts whose retry was decided but not started (a crash, Polyaxon down): start them."""
        from bot.polyaxon import GatewayError

        started, errors = 0, []
        with self.deps.sessions() as s:
            failed = repos.failed_runs_since(s, since=now - RETRY_WINDOW)
        for run in failed:
            if (run.failure or {}).get("retry") != "due":
                continue
            try:
                started += int(self._start_retry(run))
            except GatewayError as exc:
                log.warning("retry of %s: %s", run.name, exc)
                errors.append(f"retry of {run.name}: {exc}")
        return started, errors

    def _start_retry(self, run: Run) -> bool:
        """Attempt N+1 of `run`: a copy from its newest complete checkpoint, on the same card. Idempotent."""
        failure = run.failure or {}
        attempt = int(failure.get("next_attempt") or run.attempt + 1)
        first_id = run.first_attempt_id or run.id
        step = failure.get("checkpoint_step")
        checkpoint = step if isinstance(step, int) else None
        name = run_name_for(run.recipe_name, f"retry:{first_id}:{attempt}")
        total = attempts_allowed(run.policy)
        # Polyaxon first: a crash after this leaves a run of that name, which the next try finds and records.
        info = copy_from_checkpoint(
            self.deps.gateway,
            run.polyaxon_uuid or "",
            name=name,
            step=checkpoint,
            patch={},
            tags=[f"recipe:{run.recipe_name}", f"attempt:{attempt}", *[f"preset:{p}" for p in run.presets]],
            description=f"attempt {attempt}/{total} of {run.name} ({failure.get('kind')})",
        )
        try:
            with self.deps.sessions() as s:
                child = repos.create_run(
                    s,
                    **inherited_fields(run),
                    name=name,
                    polyaxon_uuid=info.uuid,
                    recipe_hash=run.recipe_hash,
                    catalog_revision=run.catalog_revision,  # the same plan, the same catalog
                    params={**run.params, **resume_patch(checkpoint)},
                    overrides=run.overrides,
                    requester=run.requester,
                    channel=run.channel,
                    status="submitting",
                    # The same card and thread, the same rules: an attempt is the run going on.
                    card_ts=run.card_ts,
                    thread_ts=run.thread_ts,
                    validation=run.validation,
                    policy=run.policy,
                    attempt=attempt,
                    first_attempt_id=first_id,
                )
                _mark_retried(s, run, name)
                repos.add_audit(
                    s,
                    user="finetune-bot",
                    channel=run.channel,
                    command=f"retry {run.name} as attempt {attempt}/{total}",
                    outcome="ok",
                    run_id=child.id,
                )
        except DuplicateError:
            # Another replica (or an earlier try of this one) started this attempt: the budget holds.
            with self.deps.sessions() as s:
                _mark_retried(s, run, name)
            return False
        self.thread.transition(
            child,
            status=info.status or "created",
            message=f"attempt {attempt}/{total}, copy of {run.polyaxon_uuid}",
            text=f":repeat: Attempt {attempt}/{total} submitted as `{escape(name)}` (Polyaxon "
            f"`{escape(str(info.uuid))}`)"
            + (f", loading `checkpoint-{checkpoint}`." if checkpoint is not None else ", from the beginning."),
        )
        return True

    def _route(self, run: Run) -> None:
        """Tell a final failure in the recipe's (or FINETUNE_NOTIFY's) channel, once, mentioning nobody."""
        channel = notify_channel(self.deps.settings.finetune.notify_routes, run.recipe_name, run.policy)
        if channel is None or channel == run.channel or run.failure is None:
            return
        with self.deps.sessions() as s:
            if repos.find_posted_message(s, run_id=run.id or 0, purpose="failure_routed") is not None:
                return
        link = self.thread.permalink(run.channel, run.card_ts)
        resp = self.deps.client.chat_postMessage(
            channel=channel, text=routed_text(run.name, run.recipe_name, run.failure, link)
        )
        with self.deps.sessions() as s:
            repos.record_posted_message(s, channel=channel, ts=str(resp["ts"]), purpose="failure_routed", run_id=run.id)

    # --- helpers ---------------------------------------------------------------------------------------

    def mention(self, run: Run) -> str:
        """The requester, @-mentioned (the only person a run's thread ever mentions); empty when they chose to hear
        it by direct message only (`notify=dm`)."""
        return self.notifier.mention(run)

    def with_mention(self, text: str, run: Run) -> str:
        """`text`, then the requester's mention on a line of its own (nothing, not even the newline, without one)."""
        who = self.mention(run)
        return f"{text}\n{who}" if who else text

    @staticmethod
    def attempt_label(run: Run) -> str:
        """` (attempt 2/3)` for a run whose recipe retries; empty otherwise."""
        total = attempts_allowed(run.policy)
        return f" (attempt {run.attempt}/{total})" if total > 1 else ""

    def never_ran_text(self, run: Run, status: str, said: str | None) -> str:
        """Polyaxon ended a run before it ran (`upstream_failed`, `skipped`): its words, how to go on, the requester."""
        return self.with_mention(never_ran_text(status, said) + resume_hint(run), run)

    def stopped_text(self, run: Run) -> str:
        """The stopped transition: why the bot stopped it when it did, and who is told."""
        failure = run.failure or {}
        why = f" — {escape(str(failure.get('title')))}" if failure.get("kind") == "start_deadline" else ""
        return self.with_mention(f":octagonal_sign: *stopped*{why}" + resume_hint(run), run)


def _mark_retried(session: Any, run: Run, name: str) -> None:
    """The failed attempt's retry is started (as run `name`): no later tick starts it again."""
    parent = repos.get_run(session, run_id=run.id or 0)
    if parent is not None and (parent.failure or {}).get("retry") == "due":
        repos.update_run(session, parent, failure={**(parent.failure or {}), "retry": "started", "retried_as": name})


def notify_channel(routes: Sequence[tuple[str, str]], recipe: str, policy: dict[str, Any] | None) -> str | None:
    """The channel a recipe's final failures are also told in: the recipe's `notify:`, else FINETUNE_NOTIFY's
    first matching glob; None when neither says."""
    own = (policy or {}).get("notify")
    if own:
        return str(own)
    return next((channel for pattern, channel in routes if fnmatch.fnmatchcase(recipe, pattern)), None)
