"""`notify=dm` end to end: a tiny run on the local Polyaxon stack, and the requester hears it ended by a direct
message (the stand-in's channel of the bot with that person), while the thread's post mentions nobody."""

from __future__ import annotations

from typing import Any

import pytest

from storage import repos
from tests.e2e.conftest import ALICE, LiveBot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

ALICE_DM = "D" + ALICE[1:]  # the stand-in's direct messages with a person (bot.local.slack.state.direct_message)


def test_a_run_with_notify_dm_sends_one_direct_message_and_its_thread_mentions_nobody(live_bot: LiveBot) -> None:
    reply = live_bot.command("run recipe=sft-tiny max_steps=4 notify=dm")
    name = run_name_in(reply)
    run = live_bot.wait_status(name, {"succeeded"})
    assert run.policy is not None and run.policy.get("notify_requester") == "dm"
    dms = wait_for(lambda: live_bot.standin.messages(ALICE_DM) if ALICE_DM in live_bot.standin.state.channels else [])
    assert len(dms) == 1
    assert f"Your run `{name}` (recipe `sft-tiny`) succeeded" in dms[0]["text"] and "loss" in dms[0]["text"]
    [told] = [t for t in live_bot.thread(run) if t.startswith(":white_check_mark:")]
    assert f"<@{ALICE}>" not in told

    def marked() -> Any:
        # The notice is marked sent just after Slack took the message: wait for the mark, then check it.
        with live_bot.runtime.services.sessions() as s:
            found = repos.get_requester_notice(s, run_id=run.id or 0, reason="succeeded")
        return found if found is not None and found.sent_at is not None else None

    notice = wait_for(marked, timeout=60)
    assert notice is not None and notice.ts == dms[0]["ts"] and notice.channel == ALICE_DM
    # Ticks after it add nothing: told once.
    live_bot.runtime.watcher.tick()  # type: ignore[union-attr]
    assert len(live_bot.standin.messages(ALICE_DM)) == 1
