"""Whether a command, button or reaction applies to a run's kind (`bot.runs.kinds`), with the facts its answer
names looked up here: a trial's sweep, a sweep's trial, the run a serving check or an evaluation is about."""

from __future__ import annotations

from dataclasses import replace

from sqlmodel import Session

from bot.grammar import scalar_text
from bot.runs.errors import RunError
from bot.runs.kinds import KindFacts, RunKind, Verb, kind_of, refusal, rule_for
from bot.runs.lookup import find_run
from storage import repos
from storage.db import SessionFactory
from storage.models import Run


def find_run_for(sessions: SessionFactory, ref: str, verb: Verb) -> Run:
    """The run `ref` names, once its kind allows `verb`; RunError (nothing changed) naming the way forward."""
    run = find_run(sessions, ref)
    refuse_by_kind(sessions, run, verb)
    return run


def refuse_by_kind(sessions: SessionFactory, run: Run, verb: Verb) -> None:
    """RunError with the table's answer when `verb` does not apply to this run's kind."""
    answer = kind_answer(sessions, run, verb)
    if answer is not None:
        raise RunError(answer)


def kind_answer(
    sessions: SessionFactory, run: Run, verb: Verb, *, example: str | None = None, reaction: str = "white_check_mark"
) -> str | None:
    """The table's answer for `verb` on this run (None: it applies); `example` names a sweep's best trial."""
    kind = kind_of(run)
    if rule_for(kind, verb).as_run:
        return None
    with sessions() as s:
        facts = kind_facts(s, run, kind)
    if example is not None:
        facts = replace(facts, example=example)
    return refusal(kind, verb, facts, reaction=reaction)


def kind_facts(s: Session, run: Run, kind: RunKind) -> KindFacts:
    """What the answers about this run name, from the database."""
    sweep = example = checked = version = stage = ""
    if kind is RunKind.TRIAL and run.sweep_id is not None:
        parent = repos.get_run(s, run_id=run.sweep_id)
        sweep = parent.name if parent is not None else ""
    if kind is RunKind.SWEEP:
        trials = list(repos.sweep_trials(s, sweep_run_id=run.id or 0))
        done = [t for t in trials if t.status == "succeeded"] or trials
        example = done[0].name if done else f"{run.name}-t1"
    if kind is RunKind.SERVING:
        check = repos.serving_check_for_run(s, run_id=run.id or 0)
        if check is not None:
            version, stage = f"{check.model}:{check.version}", check.stage
            registration = repos.get_registration(s, model=check.model, version=check.version)
            source = repos.get_run(s, run_id=registration.run_id) if registration is not None else None
            checked = source.name if source is not None else ""
    if kind is RunKind.EVAL and run.parent_run_id is not None:
        source = repos.get_run(s, run_id=run.parent_run_id)
        checked = source.name if source is not None else ""
    return KindFacts(
        name=run.name,
        recipe=run.recipe_name,
        again=again_command(run),
        sweep=sweep,
        example=example,
        checked=checked or "RUN",
        version=version or "MODEL:VERSION",
        stage=stage or "STAGE",
    )


def again_command(run: Run) -> str:
    """`/finetune run recipe=R k=v …`: the recipe trained with the run's own overrides."""
    overrides = "".join(f" {k}={scalar_text(v)}" for k, v in sorted(run.overrides.items()) if k != "resume_from")
    return f"/finetune run recipe={run.recipe_name}{overrides}"
