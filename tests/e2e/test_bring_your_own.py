"""docs/bring-your-own.md, run as written: its files written where their titles say (in a copy of the catalog),
`finetune-bot manifests check` on it, its bad row refused in its own words, and its first run to `succeeded` on
the real local Polyaxon.

The one liberty: the recipe's local paths are made absolute, because the local agent runs every job from the
repository's root, not from this copy's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.catalog import Catalog, PlanError
from bot.local.polyaxon import LocalPolyaxonStack
from tests.bot.catalog.planning import plan
from tests.e2e.conftest import REPO, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.manifests.catalog_repo import copy_manifests

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

DOC = REPO / "docs" / "bring-your-own.md"
_BLOCK = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def blocks() -> dict[str, str]:
    """The doc's titled blocks: title -> text."""
    found = {title: text for _, title, text in _BLOCK.findall(DOC.read_text(encoding="utf-8"))}
    assert {"manifests/datasets/team-qa.yaml", "manifests/recipes/sft-team-faq.yaml", "check"} <= set(found)
    return found


def write_catalog(root: Path) -> Path:
    """A copy of the shipped catalog under `root/manifests`, with the doc's files written in."""
    catalog = copy_manifests(root / "manifests")
    for title, text in blocks().items():
        if title.startswith("manifests/"):
            path = root / title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    recipe_path = catalog / "recipes" / "sft-team-faq.yaml"
    recipe = yaml.safe_load(recipe_path.read_text(encoding="utf-8"))
    recipe["model"]["path"] = str(REPO / recipe["model"]["path"])
    recipe["code"]["path"] = str(REPO / recipe["code"]["path"])
    entry_path = catalog / "datasets" / "team-qa.yaml"
    entry = yaml.safe_load(entry_path.read_text(encoding="utf-8"))
    entry["path"] = str(root / entry["path"])
    recipe_path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    entry_path.write_text(yaml.safe_dump(entry, sort_keys=False), encoding="utf-8")
    return catalog


@pytest.fixture(scope="module")
def team(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveBot, Path]]:
    folder = tmp_path_factory.mktemp("byo")
    catalog = write_catalog(folder / "repo")
    with start_live_bot(polyaxon_stack, folder, catalog_dir=catalog) as bot:
        yield bot, catalog


def test_manifests_check_as_written_passes(team: tuple[LiveBot, Path]) -> None:
    _, catalog = team
    command = blocks()["check"].split()
    assert command[:2] == ["finetune-bot", "manifests"]
    script = Path(sys.executable).parent / "finetune-bot"
    done = subprocess.run(
        [str(script), *command[1:-1], str(catalog)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "every recipe x preset pair compiles" in done.stdout


def test_the_bad_row_is_refused_in_the_doc_s_words(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path / "repo")
    train = tmp_path / "repo" / "manifests" / "datasets" / "team-qa" / "train.jsonl"
    lines = train.read_text(encoding="utf-8").splitlines()
    lines[2] = '{"prompt": "How do I pause ingestion?"}'
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(PlanError) as info:
        plan(Catalog.load(catalog), "run recipe=sft-team-faq")
    said = blocks()["a bad row"].strip().split(": ", 1)[1]  # the doc's words, past the file's path
    assert said in info.value.message and "team-qa/train.jsonl:3" in info.value.message, info.value.message


def test_the_first_run_as_written_succeeds_with_the_flop_estimate(team: tuple[LiveBot, Path]) -> None:
    bot, _ = team
    dry, run = blocks()["slack"].strip().splitlines()
    planned = reply_text(bot.command(dry.removeprefix("/finetune ")))
    assert "FLOP model: 10 steps × 4 rows" in planned, planned
    name = run_name_in(bot.command(run.removeprefix("/finetune ")))
    done = bot.wait_status(name, {"succeeded", "failed"}, timeout=300)
    assert done.status == "succeeded", bot.thread(done)
    assert done.catalog_revision and done.catalog_revision.startswith("sha256:")
