"""sft-tiny and quickstart, compiled by the catalog, run to success on the local Polyaxon stack."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bot.catalog import Catalog
from bot.grammar import RunCommand
from bot.polyaxon import PolyaxonGateway
from tests.fixtures import polyaxon as plx
from tests.manifests.catalog_repo import MANIFESTS, REPO

polyaxon_stack = plx.polyaxon_stack
gateway = plx.gateway

pytestmark = [pytest.mark.slow, pytest.mark.polyaxon, pytest.mark.trainer]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """The repository's catalog, with the tiny model built where sft-tiny expects it (the stack runs in REPO)."""
    if not (REPO / ".finetune" / "models" / "tiny-llama" / "config.json").is_file():
        build = [sys.executable, "-m", "trainer.tiny_model", ".finetune/models/tiny-llama"]
        subprocess.run(build, cwd=REPO, check=True, timeout=300)
    return Catalog.load(MANIFESTS)


@pytest.mark.parametrize(
    ("recipe", "overrides", "metric"),
    [("sft-tiny", {"max_steps": 10}, "eval_loss"), ("quickstart", {"epochs": 3}, "accuracy")],
    ids=["sft-tiny", "quickstart"],
)
def test_recipe_runs_on_the_local_stack(
    catalog: Catalog, gateway: PolyaxonGateway, recipe: str, overrides: dict[str, int], metric: str
) -> None:
    plan = catalog.plan(RunCommand(recipe=recipe, overrides=overrides))
    run = gateway.submit(plan.operation, name=plx.unique_name(f"h5-{recipe}"), tags=plan.tags)
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed", "stopped"}, timeout_s=300)
    tail = gateway.tail_logs(run.uuid, lines=30)
    assert done.status == "succeeded", tail
    deadline = time.monotonic() + 30
    while metric not in gateway.last_metrics(run.uuid) and time.monotonic() < deadline:
        time.sleep(1)
    assert metric in gateway.last_metrics(run.uuid)
