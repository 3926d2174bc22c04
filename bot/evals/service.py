"""Starting an evaluation: what `eval RUN|MODEL:VERSION [suite=NAME]` names, checked, then one run of kind `eval`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.catalog.choices import MODEL_FOLDER, ChainBase
from bot.grammar import EvalCommand
from bot.registry.policy import Candidate
from bot.runs.chain import confirmed_model, model_of
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.submit import Submitter
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import Run
from storage.repos.runs import TERMINAL_STATUSES

if TYPE_CHECKING:
    from sqlmodel import Session

USE = "evaluated"


class EvalService:
    """Starts evaluation runs; the watcher follows them like any run."""

    def __init__(self, deps: RunDeps, submitter: Submitter) -> None:
        self.deps = deps
        self.submitter = submitter

    def start(self, cmd: EvalCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """Check the subject and the suite, then submit the evaluation; its card goes in the subject's thread."""
        if not self.deps.people.may_run(user):
            raise RunError(f"{mention(user)} may not start runs here; ask someone in FINETUNE_RUNNERS")
        subject, base, label = self._subject(cmd)
        plan = self.deps.catalog.plan_eval(subject.recipe_name, base=base, subject=label, suite=cmd.suite)
        suite = plan.pins.get("eval_suite", "").partition("@")[0]
        self._refuse_twin(subject, plan.eval_contract_hash, suite)

        def record(s: Session, run: Run) -> None:
            # Its card and posts go in the evaluated run's thread, and it is that run's child (bot.runs.kinds).
            repos.update_run(
                s,
                run,
                thread_ts=subject.thread_ts or subject.card_ts,
                channel=subject.channel,
                parent_run_id=subject.id,
            )

        reply, run = self.submitter.start(
            plan,
            overrides={},
            notes=[],
            user=user,
            channel=subject.channel or channel,
            delivery_key=delivery_key,
            record=record,
        )
        if run is None:  # the same delivery again
            return reply
        return Reply(
            text=(
                f"Started `{escape(run.name)}`: {escape(label)} on suite *{escape(suite)}* "
                f"(contract `{escape(plan.eval_contract_hash.removeprefix('sha256:')[:12])}`). Its card and results "
                f"follow in the thread of `{escape(subject.name)}`."
            )
        )

    def _subject(self, cmd: EvalCommand) -> tuple[Run, ChainBase, str]:
        """The training run whose final model is evaluated, that model, and how the run's card names it."""
        if cmd.run is not None:
            run, base = confirmed_model(self.deps.sessions, cmd.run, use=USE)
            return run, base, f"run {run.name}"
        model, version = cmd.model or "", cmd.version or ""
        with self.deps.sessions() as s:
            registration = repos.get_registration(s, model=model, version=version)
            known = [r.version for r in repos.list_registrations(s, model=model)]
            source = repos.get_run(s, run_id=registration.run_id) if registration is not None else None
            request = (
                repos.get_approval_request(s, request_id=registration.request_id)
                if registration is not None and registration.request_id is not None
                else None
            )
        label = f"`{escape(model)}:{escape(version)}`"
        if registration is None:
            there = f"its versions: {escape(', '.join(known))}" if known else "it has no registered version"
            raise RunError(f"{label} is not registered ({there}); `/finetune register RUN model={escape(model)}`")
        if source is None:
            raise RunError(f"the run of {label} is missing from the database")
        run = source
        base = model_of(run, use=USE)
        candidate = Candidate.model_validate(request.candidate) if request is not None and request.candidate else None
        path = (candidate.checkpoint_path or "").rstrip("/") if candidate is not None else ""
        if path and not path.endswith(MODEL_FOLDER):
            # The final model is what `outputs` pinned by digest; another checkpoint has no digest the job can check.
            raise RunError(
                f"{label} was registered from `{escape(path)}`, not `{escape(run.name)}`'s final model "
                f"({MODEL_FOLDER}): only final models, pinned by the digest `outputs` confirmed, are evaluated"
            )
        return run, base, f"model {model}:{version} (run {run.name})"

    def _refuse_twin(self, subject: Run, contract_hash: str, suite: str) -> None:
        """One evaluation of a model on a suite at a time: a second would only repeat the first."""
        with self.deps.sessions() as s:
            twins = [
                r
                for r in repos.child_runs(s, parent_id=subject.id or 0, kind="eval")
                if r.eval_contract_hash == contract_hash and r.status not in TERMINAL_STATUSES
            ]
        if twins:
            raise RunError(
                f"`{escape(twins[0].name)}` is evaluating `{escape(subject.name)}` on suite {escape(suite)} already "
                f"({escape(twins[0].status)}); its results follow in the thread"
            )
