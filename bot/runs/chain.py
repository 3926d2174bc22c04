"""`base=RUN`: a run that starts from a finished run's final model (SFT, then DPO on its result, say).

The base is looked up here, where runs are known, and handed to the catalog as a `ChainBase`: a run of a kind
whose final model can be built on (what `register` accepts), that succeeded, and whose outputs `/finetune outputs`
read back and confirmed; the chained run pins that model by the digest its outputs recorded (the trainer checks
it before loading), and its recipe must start from the model the base run started from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.catalog.choices import BASE_KEY, ChainBase
from bot.grammar import RunCommand
from bot.runs.admit import find_run_for
from bot.runs.errors import RunError
from bot.runs.kinds import Verb
from bot.slack.blocks import escape
from storage.db import SessionFactory
from storage.models import Run

if TYPE_CHECKING:
    from bot.catalog import Catalog, Plan


def chain_base(sessions: SessionFactory, ref: str) -> ChainBase:
    """The base a `base=RUN` names, once it is a succeeded run whose outputs are confirmed; RunError otherwise."""
    return confirmed_model(sessions, ref, use="a base")[1]


def confirmed_model(sessions: SessionFactory, ref: str, *, use: str) -> tuple[Run, ChainBase]:
    """A succeeded run whose final model `outputs` confirmed, and that model as a `ChainBase` (what a chained run
    or an evaluation copies in and checks by digest); RunError saying what is missing otherwise. `use` names what
    the model is wanted for, in the refusal."""
    run = find_run_for(sessions, ref, Verb.REGISTER)
    return run, model_of(run, use=use)


def model_of(run: Run, *, use: str) -> ChainBase:
    """The run's confirmed final model as a `ChainBase`, or RunError."""
    name = escape(run.name)
    if run.status != "succeeded":
        raise RunError(f"`{name}` is {escape(run.status)}: only a succeeded run's final model can be {use}")
    check = run.outputs_check or {}
    digest = check.get("model_digest")
    if run.outputs_confirmed_at is None or not check.get("confirmed") or not digest or not run.polyaxon_uuid:
        raise RunError(
            f"`{name}`'s outputs are not confirmed: run `/finetune outputs {name}` first — {use} is the final model "
            "its outputs check read back and pinned by digest"
        )
    return ChainBase(
        run_name=run.name,
        run_uuid=run.polyaxon_uuid,
        model_digest=str(digest),
        model_pin=str(run.pins.get("model", "")),
    )


def plan_run(catalog: Catalog, sessions: SessionFactory, cmd: RunCommand) -> Plan:
    """The catalog's plan of a `run` command, its `base=RUN` looked up first (RunError or PlanError if refused)."""
    ref = cmd.overrides.get(BASE_KEY)
    base = chain_base(sessions, str(ref)) if ref is not None else None
    return catalog.plan(cmd, base=base)
