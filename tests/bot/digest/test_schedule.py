"""Digest scheduling: crontab slots, persistence across restarts, a late digest posted once, one post per slot."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.cron import CronTrigger

from bot.digest import cron_for
from bot.grammar import DigestCommand
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.scheduler import PERSISTENT, latest_fire_time, stop_scheduler
from storage import repos
from storage.db import make_engine
from tests.bot.digest.digest_env import build_runtime
from tests.fixtures.db import migrate

CHANNEL = DEFAULT_CHANNEL
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    with SlackStandIn() as s:
        yield s


@pytest.fixture
def migrated_url(database_url: str) -> str:
    eng = make_engine(database_url)
    migrate(eng)
    eng.dispose()
    return database_url


def _digests(standin: SlackStandIn) -> list[dict[str, object]]:
    return [m for m in standin.messages(CHANNEL) if "Training digest" in m.get("text", "")]


def _wait(predicate: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    pytest.fail("condition not met in time")


@pytest.mark.parametrize(
    ("cmd", "cron"),
    [
        (DigestCommand(mode="daily", time="09:00"), "0 9 * * *"),
        (DigestCommand(mode="daily", time="17:45", tz="Europe/Berlin"), "45 17 * * *"),
        (DigestCommand(mode="weekly", day="monday", time="08:30"), "30 8 * * mon"),
        (DigestCommand(mode="weekly", day="Fri", time="16:00"), "0 16 * * fri"),
    ],
    ids=["daily", "daily-tz", "weekly-long-day", "weekly-short-day"],
)
def test_cron_for(cmd: DigestCommand, cron: str) -> None:
    assert cron_for(cmd) == cron


@pytest.mark.parametrize(
    ("cron", "tz", "now", "slot"),
    [
        ("0 9 * * *", "UTC", datetime(2026, 12, 2, 9, 30, tzinfo=UTC), datetime(2026, 12, 2, 9, 0, tzinfo=UTC)),
        ("0 9 * * *", "UTC", datetime(2026, 12, 2, 8, 59, tzinfo=UTC), datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
        (
            "0 9 * * *",
            "Europe/Berlin",
            datetime(2026, 12, 2, 8, 30, tzinfo=UTC),
            datetime(2026, 12, 2, 8, 0, tzinfo=UTC),
        ),
        ("30 8 * * mon", "UTC", datetime(2026, 12, 2, 12, 0, tzinfo=UTC), datetime(2026, 11, 30, 8, 30, tzinfo=UTC)),
    ],
    ids=["today", "yesterday", "berlin", "weekly"],
)
def test_latest_slot_with_a_controlled_clock(cron: str, tz: str, now: datetime, slot: datetime) -> None:
    got = latest_fire_time(CronTrigger.from_crontab(cron, timezone=tz), now)
    assert got is not None and got.astimezone(UTC) == slot


def test_digest_now_posts_and_off_removes_schedule(migrated_url: str, standin: SlackStandIn) -> None:
    rt = build_runtime(migrated_url, standin.base_url, standin.bot_token)
    rt.scheduler.start(paused=True)
    rt.start()
    try:
        reply = rt.apply(
            DigestCommand(mode="daily", time="09:00", tz="Europe/Berlin"), channel=CHANNEL, user="U0ALICE01"
        )
        assert "Digest scheduled daily at 09:00 (Europe/Berlin)" in reply
        assert rt.scheduler.get_job(f"digest:{CHANNEL}", jobstore=PERSISTENT) is not None
        assert rt.apply(DigestCommand(mode="now"), channel=CHANNEL, user="U0ALICE01") == "Posted the digest."
        (posted,) = _digests(standin)
        assert "No runs since" in str(posted["blocks"])
        assert "Digests are off" in rt.apply(DigestCommand(mode="off"), channel=CHANNEL, user="U0ALICE01")
        assert rt.scheduler.get_job(f"digest:{CHANNEL}", jobstore=PERSISTENT) is None
        assert "had no digest schedule" in rt.apply(DigestCommand(mode="off"), channel=CHANNEL, user="U0ALICE01")
        with rt.sessions() as s:
            assert repos.list_digest_schedules(s) == []
            assert [e.command for e in repos.list_audit(s, user="U0ALICE01")][-1].startswith("digest daily")
    finally:
        stop_scheduler(rt.scheduler)
        rt.stop()


def test_schedule_survives_restart_and_missed_digest_is_posted_once_late(
    migrated_url: str, standin: SlackStandIn
) -> None:
    due = datetime.now(UTC) - timedelta(hours=2)
    first = build_runtime(migrated_url, standin.base_url, standin.bot_token)
    first.scheduler.start(paused=True)
    first.start()
    first.apply(DigestCommand(mode="daily", time=f"{due:%H:%M}", tz="UTC"), channel=CHANNEL, user="U0ALICE01")
    # The bot "was down" at the due time: the stored job's next run is in the past when it comes back.
    first.scheduler.get_job(f"digest:{CHANNEL}", jobstore=PERSISTENT).modify(next_run_time=due)
    stop_scheduler(first.scheduler)
    first.stop()
    assert _digests(standin) == []

    second = build_runtime(migrated_url, standin.base_url, standin.bot_token)
    second.scheduler.start(paused=True)
    second.start()
    assert second.scheduler.get_job(f"digest:{CHANNEL}", jobstore=PERSISTENT) is not None
    second.scheduler.resume()
    _wait(lambda: len(_digests(standin)) == 1)
    time.sleep(1.0)  # a second, duplicate post would show up here
    stop_scheduler(second.scheduler)
    second.stop()
    (posted,) = _digests(standin)
    assert "is posted 2 h late (the bot was not running then)" in str(posted["blocks"])
    third = build_runtime(migrated_url, standin.base_url, standin.bot_token)
    third.scheduler.start(paused=True)
    third.start()
    job = third.scheduler.get_job(f"digest:{CHANNEL}", jobstore=PERSISTENT)
    job_next = job.next_run_time if job else None
    stop_scheduler(third.scheduler)
    third.stop()
    assert job_next is not None and job_next > datetime.now(UTC)  # the next one is tomorrow's
    assert len(_digests(standin)) == 1


@pytest.mark.postgres
def test_two_replicas_on_one_postgres_post_one_digest(pg_schema_url: str, standin: SlackStandIn) -> None:
    eng = make_engine(pg_schema_url)
    migrate(eng)
    eng.dispose()
    due = datetime.now(UTC) - timedelta(minutes=30)
    setup = build_runtime(pg_schema_url, standin.base_url, standin.bot_token)
    setup.scheduler.start(paused=True)
    setup.start()
    setup.apply(DigestCommand(mode="daily", time=f"{due:%H:%M}", tz="UTC"), channel=CHANNEL, user="U0ALICE01")
    setup.scheduler.get_job(f"digest:{CHANNEL}", jobstore=PERSISTENT).modify(next_run_time=due)
    stop_scheduler(setup.scheduler)
    setup.stop()

    replicas = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.bot.digest.digest_env",
                pg_schema_url,
                standin.base_url,
                standin.bot_token,
                "6",
            ],
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    for proc in replicas:
        assert proc.wait(timeout=60) == 0
    assert len(_digests(standin)) == 1
    assert len(standin.calls("chat.postMessage")) == 1


def test_waiting_approval_requests_come_from_the_database_with_their_own_quorum(
    migrated_url: str, standin: SlackStandIn
) -> None:
    now = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    runtime = build_runtime(migrated_url, standin.base_url, standin.bot_token, clock=lambda: now)
    with runtime.sessions() as s:
        run = repos.create_run(
            s, name="sft-tiny-aaaa", recipe_name="sft-tiny", recipe_hash="h", requester="U0ALICE01", channel=CHANNEL
        )

        posted: list[int] = []

        def request(model: str, *, quorum: int, status: str = "open", expires: timedelta = timedelta(hours=1)) -> int:
            req = repos.create_approval_request(
                s,
                run_id=run.id,
                model=model,
                requester="U0ALICE01",
                channel=CHANNEL,
                message_ts=f"1796000000.{len(posted) + 1:06d}",  # one request message each
                candidate_digest="d" * 64,
                status=status,
                quorum=quorum,
                expires_at=now + expires,
            )
            posted.append(req.id or 0)
            return req.id or 0

        waiting = request("tiny-chat", quorum=3)  # made when the quorum was 3; settings now say 2
        repos.add_approval(s, request_id=waiting, user="U0BOB0001", reaction="white_check_mark", message_ts="1.2")
        request("expired", quorum=1, expires=-timedelta(minutes=1))
        request("done", quorum=1, status="registered")
    data = runtime.collect(CHANNEL, now=now, scheduled_for=None, period=timedelta(days=1))
    [approval] = data.approvals
    assert approval.model == "tiny-chat" and approval.run_name == "sft-tiny-aaaa"
    assert approval.approved_by == ["U0BOB0001"] and approval.quorum == 3
    assert approval.can_still_approve == ["U0CAROL01"]  # not bob again, never the requester
