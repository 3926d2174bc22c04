"""A team's catalog through the front door (signed HTTP -> Bolt -> the bot as `serve` builds it): a recipe on a
dataset with a bad row is refused before anything is submitted, naming the file and line; a recipe added while the
bot runs is offered within the catalog's poll (5 s by default), with the catalog's revision."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from tests.fixtures.slack import served_runtime, wait_for
from tests.manifests.catalog_repo import add_team_dataset, make_repo, team_rows


@pytest.fixture
def team(slack_standin: SlackStandIn, tmp_path: Path) -> Iterator[tuple[Runtime, SlackSender, Path]]:
    catalog_dir = make_repo(tmp_path / "repo")
    with served_runtime(slack_standin, f"sqlite:///{tmp_path / 'bot.db'}", catalog_dir=catalog_dir) as (rt, send):
        yield rt, send, catalog_dir


def _reply(standin: SlackStandIn, sender: SlackSender, text: str) -> str:
    before = len(standin.response_url_posts())
    assert sender.slash_command(text, channel_id=DEFAULT_CHANNEL).status == 200
    posts = wait_for(lambda: standin.response_url_posts()[before:] or None, timeout=30)
    payload: dict[str, Any] = posts[0]["payload"]
    return str(payload.get("text")) + str(payload.get("blocks"))


def test_a_recipe_added_while_the_bot_runs_is_offered_within_the_poll_and_bad_rows_refuse_it(
    team: tuple[Runtime, SlackSender, Path], slack_standin: SlackStandIn
) -> None:
    runtime, sender, catalog_dir = team
    first = _reply(slack_standin, sender, "recipes")
    assert "sft-team-faq" not in first and "Catalog `sha256:" in first  # the copy is no git checkout
    assert "no recipe 'sft-team-faq'" in _reply(slack_standin, sender, "run recipe=sft-team-faq --dry-run")
    rows = team_rows()
    rows[9] = '{"prompt": "only a prompt"}'
    add_team_dataset(catalog_dir, train=rows)
    added = time.monotonic()
    wait_for(lambda: "sft-team-faq" in _reply(slack_standin, sender, "recipes"), timeout=20, interval=1.0)
    taken_s = time.monotonic() - added
    assert taken_s < 12, taken_s  # the default poll is 5 s
    refused = _reply(slack_standin, sender, "run recipe=sft-team-faq --dry-run")
    assert "cannot run on its data; nothing was submitted" in refused, refused
    assert "manifests/datasets/team-qa/train.jsonl:10: a prompt_completion row needs" in refused, refused
    # The fixed file is taken the same way, and the recipe plans.
    (catalog_dir / "datasets" / "team-qa" / "train.jsonl").write_text("\n".join(team_rows()) + "\n", encoding="utf-8")
    wait_for(
        lambda: "cannot run on its data" not in _reply(slack_standin, sender, "run recipe=sft-team-faq --dry-run"),
        timeout=20,
        interval=1.0,
    )
    assert runtime.services.catalog is not None and runtime.services.catalog.revision is not None
