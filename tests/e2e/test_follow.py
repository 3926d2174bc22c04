"""`logs RUN follow` through the real front door: a real run's log streamed into its thread until it ends."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import BOB, CHANNEL, LiveBot, reply_text
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]


def test_a_followed_run_streams_one_message_that_stops_with_its_final_status(live_bot: LiveBot) -> None:
    started = reply_text(live_bot.command("run recipe=sft-tiny max_steps=40 save_steps=20"))
    match = re.search(r"`([a-z0-9-]+-[0-9a-f]{10})`", started)
    assert match, started
    run = live_bot.wait_status(match.group(1), {"running"})
    assert run.card_ts is not None

    reply = reply_text(live_bot.command(f"logs {run.name} follow"))
    assert f"Streaming `{run.name}`'s log" in reply, reply
    # A second follow while it streams links to the stream instead of starting another.
    again = reply_text(live_bot.command(f"logs {run.name} follow", user=BOB))
    assert "already streaming" in again and "<https://" in again, again

    def streamed() -> list[dict[str, object]]:
        return [
            m
            for m in live_bot.standin.replies(CHANNEL, run.card_ts or "")
            if live_bot.standin.stream_state(CHANNEL, str(m["ts"])) is not None
        ]

    def stopped() -> dict[str, object] | None:
        messages = streamed()
        last = messages[-1] if messages else None
        return last if last and live_bot.standin.stream_state(CHANNEL, str(last["ts"])) == "stopped" else None

    message = wait_for(stopped, timeout=240, interval=0.5)
    assert len(streamed()) == 1 and len(live_bot.standin.calls("chat.startStream")) == 1
    text = str(message["text"])
    assert text.startswith(f"**Log of `{run.name}`**")
    assert "```" in text and "loss" in text, text
    assert text.endswith(":checkered_flag: The run ended with status **succeeded**."), text[-300:]
    assert live_bot.standin.bot_token not in text
