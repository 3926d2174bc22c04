"""A team's own dataset and recipe on the real local Polyaxon: a bad row refuses `/finetune run` before anything is
submitted (no card, no Polyaxon run), and once the file is fixed the catalog takes it without a restart and the
run goes to Polyaxon, its card naming the catalog's revision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from tests.e2e.conftest import CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for
from tests.manifests.catalog_repo import add_team_dataset, make_repo, team_rows

pytestmark = [pytest.mark.polyaxon]


@pytest.fixture(scope="module")
def team(
    polyaxon_stack: LocalPolyaxonStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveBot, Path]]:
    folder = tmp_path_factory.mktemp("team")
    catalog_dir = make_repo(folder / "repo")
    rows = team_rows()
    rows[9] = '{"prompt": "only a prompt"}'
    add_team_dataset(catalog_dir, train=rows)
    with start_live_bot(polyaxon_stack, folder, catalog_dir=catalog_dir, finetune={"catalog_poll_s": 1.0}) as bot:
        yield bot, catalog_dir


def test_a_bad_row_refuses_the_run_before_anything_is_submitted_and_the_fix_is_taken_live(
    team: tuple[LiveBot, Path],
) -> None:
    bot, catalog_dir = team
    cards = len(bot.standin.messages(CHANNEL))
    refused = reply_text(bot.command("run recipe=sft-team-faq"))
    assert "cannot run on its data; nothing was submitted" in refused, refused
    assert "manifests/datasets/team-qa/train.jsonl:10: a prompt_completion row needs" in refused, refused
    assert len(bot.standin.messages(CHANNEL)) == cards  # no card
    assert not [r for r in bot.runtime.services.gateway.list_runs(limit=100) if r.name.startswith("sft-team-faq")]
    (catalog_dir / "datasets" / "team-qa" / "train.jsonl").write_text("\n".join(team_rows()) + "\n", encoding="utf-8")
    catalog = bot.runtime.services.catalog
    assert catalog is not None
    wait_for(lambda: not catalog.datasets["team-qa"].problems, timeout=20, interval=0.5)
    name = run_name_in(bot.command("run recipe=sft-team-faq"))
    run = wait_for(lambda: (r := bot.run_named(name)).polyaxon_uuid and r, timeout=60)
    assert run.catalog_revision == catalog.revision and run.catalog_revision
    bot.wait_card(run, f"catalog `{run.catalog_revision}`")
    bot.command(f"stop {name}")  # the copy's model is a stand-in folder: nothing to train here
