"""Can this deployment run a plan's kind at all? Pure: the capability comes in as the run kinds it cannot execute.

Polyaxon accepts any operation and only its agent finds out, seconds later, that it has no converter for the kind
(`Converter Error. Specification with run kind: pytorchjob is not supported in this deployment version`): the
local stack has no training operator. Where the deployment says so (`FINETUNE_UNSUPPORTED_RUN_KINDS`), `run` is
refused up front with the way forward, and `--dry-run` warns, instead of a run that fails in 4 s.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.catalog import Plan

SETTING = "FINETUNE_UNSUPPORTED_RUN_KINDS"


def run_kind(plan: Plan) -> str:
    """The Polyaxon run kind the plan's operation asks for (`job` when its resources do not say)."""
    return str(plan.resources.get("run_kind") or "job")


def unsupported_reason(plan: Plan, unsupported: Collection[str], *, preflight: str | None) -> str | None:
    """Why this deployment cannot run the plan, with the way forward; None when it can.

    `preflight` is the `/finetune preflight …` that validates the plan, quoted for a distributed recipe (its
    preflight is one local job, which runs here).
    """
    kind = run_kind(plan)
    if kind not in unsupported:
        return None
    why = f"this deployment cannot run `{kind}` operations ({SETTING})"
    if kind == "pytorchjob":
        way = "the run needs a cluster with the training operator"
        if plan.distributed and preflight:
            way = f"the preflight runs here: `{preflight}`; {way}"
        return f"`{plan.recipe}` is a distributed run and {why}: {way}"
    return f"`{plan.recipe}` is a `{kind}` and {why}: run it on a Polyaxon deployment that supports `{kind}`"
