"""Commands that write one row per channel, arriving together through the real front door (signed HTTP -> Bolt ->
the service -> the database), on SQLite and PostgreSQL: every one is answered, none with "Something went wrong",
and what is stored at the end agrees with the scheduler (the digest's job) and with one of the commands.

`digest daily 09:30` arriving beside other `digest` commands for the channel once raised SQLAlchemy's
`StaleDataError` in `upsert_digest_schedule` (a read, then an UPDATE of a row another command had deleted).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bot.app import Runtime
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from storage import repos
from tests.fixtures.slack import served_runtime, wait_for

ROUNDS = 6
COMMANDS = ["digest daily 09:30", "digest off", "digest weekly mon 10:00", "digest daily 07:15 tz=Europe/Berlin"]


@pytest.fixture
def bot(slack_standin: SlackStandIn, database_url: str) -> Iterator[tuple[Runtime, SlackSender]]:
    """The bot as `serve` builds it, on the backend under test, without Polyaxon."""
    with served_runtime(slack_standin, database_url) as served:
        yield served


def _send_together(sender: SlackSender, texts: list[str]) -> None:
    """Every text as its own slash command, all released at once (one thread each)."""
    barrier = threading.Barrier(len(texts))
    statuses: list[int] = []

    def send(text: str) -> None:
        barrier.wait()
        statuses.append(sender.slash_command(text, channel_id=DEFAULT_CHANNEL).status)

    threads = [threading.Thread(target=send, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == [200] * len(texts), statuses


def _answers(standin: SlackStandIn, before: int, count: int) -> list[str]:
    posts = wait_for(lambda: (got := standin.response_url_posts()[before:]) and len(got) >= count and got, timeout=60)
    assert posts, f"fewer than {count} answers"
    out: list[str] = []
    for post in posts:
        payload: dict[str, Any] = post["payload"]
        out.append(str(payload.get("text")) + str(payload.get("blocks")))
    return out


def test_digest_commands_for_one_channel_arriving_together_are_each_answered_and_agree(
    bot: tuple[Runtime, SlackSender], slack_standin: SlackStandIn
) -> None:
    runtime, sender = bot
    for _ in range(ROUNDS):
        before = len(slack_standin.response_url_posts())
        _send_together(sender, COMMANDS)
        answers = _answers(slack_standin, before, len(COMMANDS))
        assert not [a for a in answers if "Something went wrong" in a], answers
        assert all(("Digest scheduled" in a or "Digests are off" in a or "had no digest" in a) for a in answers)
        with runtime.services.sessions() as s:
            schedules = [x for x in repos.list_digest_schedules(s) if x.channel == DEFAULT_CHANNEL]
        job = runtime.scheduler.get_job(f"digest:{DEFAULT_CHANNEL}")
        # One row at most, and the scheduler's job says what the row says (no job without a row, none left behind).
        assert len(schedules) <= 1
        if schedules:
            assert job is not None, "a stored schedule without its job"
            assert (schedules[0].cron, schedules[0].timezone) in {
                ("30 9 * * *", "UTC"),
                ("0 10 * * mon", "UTC"),
                ("15 7 * * *", "Europe/Berlin"),
            }
            assert str(job.trigger.timezone) == schedules[0].timezone
        else:
            assert job is None, "a job left behind for a schedule that was removed"
