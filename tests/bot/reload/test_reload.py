"""The catalog reloads itself: a change is checked whole and swapped into the one catalog every service holds; a
change that does not load keeps the old in force and says why; the revision names what is in force."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.catalog import Catalog, PlanError
from bot.catalog.datasets import RowCache
from bot.explain import render_recipes
from bot.reload import CatalogReloader, revision
from tests.bot.catalog.planning import plan
from tests.manifests.catalog_repo import add_team_dataset, make_repo, write

NOW = datetime(2026, 12, 7, 14, 5, tzinfo=UTC)


def _text(blocks: list[dict[str, object]]) -> str:
    return str(blocks)


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_a_recipe_added_while_the_bot_runs_is_planned_from_the_same_catalog_object(catalog_dir: Path) -> None:
    rows = RowCache()
    catalog = Catalog.load(catalog_dir, rows=rows)
    reloader = CatalogReloader(catalog, rows=rows, clock=lambda: NOW)
    assert reloader.poll().outcome == "unchanged"
    with pytest.raises(PlanError, match="no recipe 'sft-team-faq'"):
        plan(catalog, "run recipe=sft-team-faq --dry-run")
    add_team_dataset(catalog_dir)
    before = catalog.revision
    outcome = reloader.poll()
    assert outcome.outcome == "reloaded" and outcome.revision != before
    # The object every service holds now plans the new recipe, and says which catalog planned it.
    planned = plan(catalog, "run recipe=sft-team-faq --dry-run")
    assert planned.recipe == "sft-team-faq" and planned.catalog_revision == catalog.revision
    assert reloader.poll().outcome == "unchanged"


def test_a_change_that_does_not_load_keeps_the_old_catalog_and_says_when_and_why(catalog_dir: Path) -> None:
    rows = RowCache()
    catalog = Catalog.load(catalog_dir, rows=rows)
    reloader = CatalogReloader(catalog, rows=rows, clock=lambda: NOW)
    in_force = catalog.revision
    write(catalog_dir, "recipes/broken.yaml", "name: broken\ndescription: x\ncomponent: trl-sft\ntrainr: sft\n")
    outcome = reloader.poll()
    assert outcome.outcome == "refused" and outcome.why is not None and "trainr" in outcome.why
    assert catalog.revision == in_force
    assert plan(catalog, "run recipe=sft-tiny --dry-run").recipe == "sft-tiny"  # still the old one, working
    shown = _text(render_recipes(catalog))
    assert "A change of the catalog at 14:05 UTC was refused" in shown and "did you mean trainer?" in shown
    (catalog_dir / "recipes" / "broken.yaml").unlink()
    assert reloader.poll().outcome == "reloaded"
    assert "was refused" not in _text(render_recipes(catalog))


def test_a_plan_being_compiled_finishes_on_the_catalog_it_started_on(catalog_dir: Path) -> None:
    catalog = Catalog.load(catalog_dir)
    old_state, old_recipes = catalog.__dict__, catalog.recipes
    add_team_dataset(catalog_dir)
    catalog.adopt(Catalog.load(catalog_dir))
    # The state is replaced, never changed: what a running plan read stays whole.
    assert catalog.__dict__ is not old_state and old_state["recipes"] is old_recipes
    assert "sft-team-faq" in catalog.recipes and "sft-team-faq" not in old_recipes


def test_the_revision_is_the_git_commit_dirty_when_it_differs_else_a_content_digest(tmp_path: Path) -> None:
    catalog_dir = make_repo(tmp_path / "repo")
    rows = RowCache()
    digest = revision(catalog_dir, rows)
    assert digest.startswith("sha256:") and digest == revision(catalog_dir, rows)
    write(catalog_dir, "recipes/README.txt", "notes")
    assert revision(catalog_dir, rows) != digest
    git = ["git", "-C", str(tmp_path / "repo"), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "catalog"], check=True)
    commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True)
    assert revision(catalog_dir, rows) == f"git:{commit.stdout.strip()}"
    write(catalog_dir, "recipes/README.txt", "changed")
    assert revision(catalog_dir, rows) == f"git:{commit.stdout.strip()}-dirty"
