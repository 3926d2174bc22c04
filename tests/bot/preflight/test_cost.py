"""A preflight holds what its presets give while it runs: its plan carries a cost profile like every run's, so its
card says what it used and `/finetune usage` counts it."""

from __future__ import annotations

from pathlib import Path

from bot.catalog import Catalog
from bot.grammar import RunCommand
from bot.preflight.service import with_cost

REPO = Path(__file__).resolve().parents[3]


def test_a_preflight_plan_is_costed_from_its_presets() -> None:
    catalog = Catalog.load(REPO / "manifests")
    plan = catalog.plan_preflight(RunCommand(recipe="sft-tiny-ddp"), require_local=False)
    run_plan = catalog.plan(RunCommand(recipe="sft-tiny-ddp"), require_local=False)
    costed = with_cost(catalog, plan)
    assert costed.kind == "preflight" and costed.cost is not None
    assert run_plan.cost is not None
    # The CPU presets of the local stack: core-hours, as the distributed run it validates would count.
    assert costed.cost.unit == run_plan.cost.unit == "core" and costed.cost.count > 0
