"""`/finetune digest …` through the real front door (signed HTTP -> Bolt -> DigestRuntime -> stand-in)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from storage import repos
from tests.fixtures.slack import served_runtime, wait_for


@pytest.fixture
def digest_bot(slack_standin: SlackStandIn, tmp_path: Path) -> Iterator[tuple[Runtime, SlackSender]]:
    """The bot as `serve` builds it, without Polyaxon: digests work, run commands say they need it."""
    with served_runtime(slack_standin, f"sqlite:///{tmp_path / 'bot.db'}") as served:
        yield served


def reply(standin: SlackStandIn, sender: SlackSender, text: str) -> str:
    before = len(standin.response_url_posts())
    assert sender.slash_command(text, channel_id=DEFAULT_CHANNEL).status == 200
    posts = wait_for(lambda: standin.response_url_posts()[before:] or None)
    payload: dict[str, Any] = posts[0]["payload"]
    return str(payload.get("text")) + str(payload.get("blocks"))


def test_digest_now_posts_one_digest_in_the_channel(
    digest_bot: tuple[Runtime, SlackSender], slack_standin: SlackStandIn
) -> None:
    runtime, sender = digest_bot
    assert "Posted the digest" in reply(slack_standin, sender, "digest now")
    [message] = slack_standin.messages(DEFAULT_CHANNEL)
    assert "Training digest" in str(message["blocks"])
    assert "No runs since" in str(message["blocks"])  # an empty period says so explicitly
    with runtime.services.sessions() as s:
        posted = repos.get_posted_message(s, channel=DEFAULT_CHANNEL, ts=message["ts"])
    assert posted is not None and posted.purpose == "digest"


def test_digest_schedule_is_stored_and_answered(
    digest_bot: tuple[Runtime, SlackSender], slack_standin: SlackStandIn
) -> None:
    runtime, sender = digest_bot
    answer = reply(slack_standin, sender, "digest daily 09:30 tz=Europe/Berlin")
    assert "Digest scheduled daily at 09:30 (Europe/Berlin)" in answer
    job = runtime.scheduler.get_job(f"digest:{DEFAULT_CHANNEL}")
    assert job is not None and str(job.trigger.timezone) == "Europe/Berlin"
    with runtime.services.sessions() as s:
        [schedule] = repos.list_digest_schedules(s)
    assert (schedule.cron, schedule.timezone) == ("30 9 * * *", "Europe/Berlin")
    assert "Digests are off" in reply(slack_standin, sender, "digest off")
    assert runtime.scheduler.get_job(f"digest:{DEFAULT_CHANNEL}") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("digest daily 25:00", "25:00"),
        ("digest weekly funday 09:00", "funday"),
        ("digest daily 09:00 tz=Mars/Olympus", "Mars/Olympus"),
    ],
)
def test_bad_digest_commands_are_refused_and_change_nothing(
    digest_bot: tuple[Runtime, SlackSender], slack_standin: SlackStandIn, text: str, expected: str
) -> None:
    runtime, sender = digest_bot
    assert expected in reply(slack_standin, sender, text)
    with runtime.services.sessions() as s:
        assert list(repos.list_digest_schedules(s)) == []
    assert slack_standin.messages(DEFAULT_CHANNEL) == []
