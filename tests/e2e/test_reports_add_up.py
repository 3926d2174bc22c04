"""What the bot reports must add up, through the front door on the real local Polyaxon (issue 33 F): a card's
"ran" and "used" agree (hours × 3600 / cores = the seconds shown; a preflight's is checked in test_preflight.py
on the preflight that module runs anyway), `logs` says how many lines it shows of how many the log holds, the
quick start counts epochs from 1 (the TensorFlow one in test_quickstart_tf.py, on the run that module runs
anyway), and `trace` of a resumed version shows the resume as typed, its parent and the
checkpoint it loaded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.slack.blocks import human_duration
from storage import repos
from storage.models import Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]


@pytest.fixture(scope="module")
def bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("add-up"), approvers=[BOB]) as live:
        yield live


def assert_ran_and_used_agree(bot: LiveBot, name: str) -> str:
    """The settled run's hours are its running seconds × what it held, and its card shows those seconds."""
    run = bot.run_named(name)
    card = reply_text(bot.wait_card(run, "used "))
    stored = bot.run_named(name)
    assert stored.cost and stored.started_at and stored.finished_at, stored
    ran = (stored.finished_at - stored.started_at).total_seconds()
    # The watcher saw the end up to a tick after Polyaxon stamped it: that tick is not counted.
    assert stored.cost["used_s"] == pytest.approx(ran, abs=1e-6)
    assert stored.cost["used_hours"] * 3600 / stored.cost["count"] == pytest.approx(ran, abs=1e-6)
    assert f"ran {human_duration(ran)} · used " in card, card
    return card


def test_a_cards_running_time_is_what_its_hours_count_and_logs_say_the_real_counts(
    bot: LiveBot, polyaxon_stack: LocalPolyaxonStack
) -> None:
    name = run_name_in(bot.command("run recipe=quickstart epochs=3"))
    run = bot.wait_status(name, {"succeeded"}, timeout=240)
    card = assert_ran_and_used_agree(bot, name)
    assert "core-hours (1 core)" in card and "epoch 3/3" in card, card

    log = Path(polyaxon_stack.store) / str(run.polyaxon_uuid) / "plxlogs" / "logs.jsonl"
    total = sum(1 for line in log.read_text().splitlines() if json.loads(line).get("value") is not None)
    assert total > 2, total
    assert f"the last 2 of {total} log lines" in reply_text(bot.command(f"logs {name} lines=2"))
    asked = total + 20
    assert f"the last {total} of {total} log lines" in reply_text(bot.command(f"logs {name} lines={asked}"))
    posts = [t for t in bot.thread(run) if "log line" in t]
    assert any(t.startswith(f"Last 2 of {total} log lines of `{name}`") for t in posts), posts
    assert any(
        t.startswith(f"All {total} log lines (asked for {asked}; the log holds no more, blank lines are not kept)")
        for t in posts
    ), posts


def test_trace_of_a_resumed_version_shows_the_resume_as_typed_its_parent_and_checkpoint(bot: LiveBot) -> None:
    first = run_name_in(bot.command("run recipe=sft-tiny max_steps=10 save_steps=5"))
    bot.wait_status(first, {"succeeded"}, timeout=300)
    extended = reply_text(bot.command(f"resume {first} max_steps=15"))
    child = bot.wait_status(run_name_in({"text": extended.split("as", 1)[-1]}), {"succeeded"}, timeout=300)
    asked = reply_text(bot.command(f"register {child.name} model=traced-resume"))
    assert "approval request" in asked, asked
    with bot.runtime.services.sessions() as s:
        [request] = repos.list_approval_requests(s, model="traced-resume")
    assert request.message_ts is not None
    bot.standin.react_as_user(BOB, CHANNEL, request.message_ts, "white_check_mark")
    bot.sender.reaction("reaction_added", user=BOB, channel=CHANNEL, ts=request.message_ts, reaction="white_check_mark")

    def registered() -> bool:
        with bot.runtime.services.sessions() as s:
            return bool(list(repos.list_registrations(s, model="traced-resume")))

    wait_for(registered, timeout=120, interval=0.5)
    traced = reply_text(bot.command("trace traced-resume:v1"))
    parent: Run = bot.run_named(first)
    assert f"*Command* `/finetune resume {first} max_steps=15` by <@{ALICE}>" in traced, traced
    assert "/finetune run recipe=sft-tiny max_steps=15" not in traced, traced
    assert (
        f"`{child.name}` started from `checkpoint-10` of `{first}` (`{parent.polyaxon_uuid}`, succeeded), "
        f"itself started with `/finetune run recipe=sft-tiny max_steps=10 save_steps=5` by <@{ALICE}>"
    ) in traced, traced
