"""`finetune-bot manifests check`: every recipe x preset pair, and a catalog without its local model."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.catalog import Catalog, check_catalog
from tests.manifests.catalog_repo import make_repo, write

# What the checks below are about does not depend on how many recipes there are: a few of each kind stand for all
# (every shipped pair is compiled by `finetune-bot manifests check`, which scripts/test.sh runs before pytest).
KEPT = {"sft-tiny", "dpo-tiny", "grpo-tiny", "quickstart", "sft-qwen-0p5b-lora", "sft-qwen-1p5b-ddp"}


def keep_a_few_recipes(catalog_dir: Path) -> None:
    for recipe in (catalog_dir / "recipes").glob("*.yaml"):
        if recipe.stem not in KEPT:
            recipe.unlink()


def test_check_catalog_reports_a_pair_that_fails(fresh_dir: Path) -> None:
    keep_a_few_recipes(fresh_dir)
    # A preset Polyaxon itself refuses: `termination.maxRetries` must be an int.
    write(
        fresh_dir,
        "presets/broken.yaml",
        "name: broken\ndescription: x\nkind: operation\nisPreset: true\ntermination: {maxRetries: many}\n",
    )
    problems = check_catalog(fresh_dir)
    assert problems and all("x broken: " in p and "Polyaxon refused the operation" in p for p in problems)
    assert len(problems) == len(Catalog.load(fresh_dir).recipes) == len(KEPT)


def test_catalog_without_model_still_checks(tmp_path: Path) -> None:
    catalog_dir = make_repo(tmp_path / "repo", with_model=False)
    keep_a_few_recipes(catalog_dir)
    assert check_catalog(catalog_dir) == []
    shutil.rmtree(catalog_dir / "recipes")
    assert check_catalog(catalog_dir) == ["recipes/: (folder): no recipes found"]
