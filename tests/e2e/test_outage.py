"""Polyaxon down at submission: the run waits as pending_submit, says so in its thread, and goes through later."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from tests.e2e.conftest import CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.polyaxon import CountingProxy

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
