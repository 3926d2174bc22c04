"""Polyaxon down at submission: the run waits as pending_submit, says so in its thread, and goes through later."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from tests.e2e.conftest import CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.polyaxon import CountingProxy
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]


@pytest.fixture
def bot_behind_proxy(polyaxon_stack: LocalPolyaxonStack, tmp_path: Path) -> Iterator[tuple[LiveBot, CountingProxy]]:
    """A bot that reaches Polyaxon through a counting proxy the test can take down."""
    with (
        CountingProxy(polyaxon_stack.host) as proxy,
        start_live_bot(polyaxon_stack, tmp_path, polyaxon_host=proxy.host) as bot,
    ):
        yield bot, proxy


def test_a_run_submitted_while_polyaxon_is_down_goes_through_once_it_is_back(
    bot_behind_proxy: tuple[LiveBot, CountingProxy],
) -> None:
    bot, proxy = bot_behind_proxy
    proxy.down = True
    name = run_name_in(bot.command("run recipe=quickstart epochs=1"))
    run = bot.wait_status(name, {"pending_submit"}, timeout=120)
    thread = "\n".join(bot.thread(run))
    assert "Polyaxon did not take the run" in thread and "retries the submission" in thread
    assert len(bot.standin.messages(CHANNEL)) == 1  # the card exists; nothing is lost
    # Still down on the next ticks: told once, not once per retry.
    bot.wait_status(name, {"pending_submit"})
    proxy.down = False
    run = bot.wait_status(name, {"created", "compiled", "queued", "scheduled", "starting", "running", "succeeded"})
    done = bot.wait_status(name, {"succeeded"}, timeout=180)
    thread_texts = bot.thread(done)
    assert sum("Polyaxon did not take the run" in t for t in thread_texts) == 1, thread_texts
    assert sum("Submitted to Polyaxon" in t for t in thread_texts) == 1, thread_texts
    assert done.polyaxon_uuid and bot.runtime.services.gateway.find_run(name) is not None
    status = reply_text(bot.command(f"status {name}"))
    assert "succeeded" in status


def _card_edits(bot: LiveBot, ts: str | None) -> list[dict[str, Any]]:
    """Every chat.update of the card with this ts that Slack took."""
    return [call for call in bot.standin.calls("chat.update") if call.get("ts") == ts]


def _buttons(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        element
        for block in card.get("blocks") or []
        for element in block.get("elements") or []
        if isinstance(element, dict) and element.get("type") == "button"
    ]


# Every command that reads or changes a run, typed while Polyaxon does not answer, and whether it needs Polyaxon
# for these two ended runs (the others are answered from the database, rightly: an ended run cannot be stopped).
DOWN_COMMANDS = {
    "status {a}": False,
    "logs {a}": True,
    "logs {a} follow": False,
    "compare {a} {b}": True,
    "outputs {a}": True,
    "resume {a}": True,
    "stop {a}": False,
    "register {a} model=outage-test": True,
    "eval {a}": False,
    "trace outage-test": False,
}


def test_every_command_and_button_says_polyaxon_is_not_answering_and_changes_nothing(
    bot_behind_proxy: tuple[LiveBot, CountingProxy],
) -> None:
    bot, proxy = bot_behind_proxy
    names = [run_name_in(bot.command("run recipe=quickstart epochs=1")) for _ in range(2)]
    runs = [bot.wait_status(name, {"succeeded"}, timeout=240) for name in names]
    a, b = (run.name for run in runs)
    with bot.runtime.services.sessions() as s:
        before = len(repos.list_recent_runs(s, limit=100))
    card = bot.card(runs[0])
    proxy.refuse()  # the server is stopped: every connection is refused
    try:
        answers: dict[str, str] = {}
        needs: dict[str, bool] = {}
        for template, needed in DOWN_COMMANDS.items():
            text = template.format(a=a, b=b)
            answers[text], needs[text] = reply_text(bot.command(text)), needed
        for button in _buttons(card):
            sent_before = len(bot.standin.response_url_posts(CHANNEL))
            sent = bot.sender.button(str(button["action_id"]), str(button["value"]), message_ts=str(card["ts"]))
            assert sent.status == 200
            posts = wait_for(lambda n=sent_before: bot.standin.response_url_posts(CHANNEL)[n:] or None, timeout=60)
            label = f"button {button.get('text', {}).get('text')}"
            answers[label], needs[label] = reply_text(posts[0]["payload"]), True
    finally:
        proxy.listen_again()
    internal = {k: v for k, v in answers.items() if "Something went wrong" in v}
    assert not internal, internal
    assert len([label for label in needs if label.startswith("button")]) >= 3, answers
    for asked, answer in answers.items():
        if not needs[asked]:
            assert "not answering" not in answer, (asked, answer)
            continue
        assert f"Polyaxon at `{proxy.host}` is not answering" in answer, (asked, answer)
        assert "Try `/finetune" in answer and "again in a minute" in answer, (asked, answer)
        assert "connection refused" in answer, (asked, answer)  # what the bot saw, in words, not a traceback
    # Nothing was started, stopped or recorded while it was down.
    with bot.runtime.services.sessions() as s:
        assert len(repos.list_recent_runs(s, limit=100)) == before
    assert bot.run_named(a).status == "succeeded"


def test_a_running_run_while_polyaxon_is_down_its_card_says_so_once_and_nothing_is_lost(
    bot_behind_proxy: tuple[LiveBot, CountingProxy],
) -> None:
    bot, proxy = bot_behind_proxy
    watcher = bot.runtime.watcher
    assert watcher is not None
    watcher.outage.tell_after = timedelta(seconds=2)  # 30 s on a deployment
    name = run_name_in(bot.command("run recipe=quickstart epochs=12"))
    run = bot.wait_status(name, {"running"}, timeout=240)
    edits_before = len(_card_edits(bot, run.card_ts))
    proxy.refuse()
    try:
        stop = reply_text(bot.command(f"stop {name}"))
        assert f"Polyaxon at `{proxy.host}` is not answering" in stop and "*not* stopped" in stop, stop
        card = bot.wait_card(run, "has not answered since", timeout=60)
        assert proxy.host in str(card["blocks"])
        # Told once: more failed ticks leave the card alone.
        told = len(_card_edits(bot, run.card_ts))
        for _ in range(3):
            watcher.tick()
        assert len(_card_edits(bot, run.card_ts)) == told
        assert told > edits_before
    finally:
        proxy.listen_again()
    # Back: the run was never stopped (the stop was not carried out), the card drops the line and catches up.
    done = bot.wait_status(name, {"succeeded", "failed", "stopped"}, timeout=240)
    assert done.status == "succeeded", bot.thread(done)
    card = bot.wait_card(done, "succeeded")
    assert "has not answered" not in str(card["blocks"])
    with bot.runtime.services.sessions() as s:
        assert repos.current_outage(s, service="polyaxon") is None
