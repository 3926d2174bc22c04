"""The watcher's bookkeeping with many runs: one list request per tick, capped refreshes, stuck once.

A fake gateway stands in for Polyaxon here to make hundreds of runs cheap; the same watcher runs against
the real server in tests/e2e (lifecycle, restart, failover, outage) and in bench/watcher.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.catalog import Catalog
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.metrics import BotMetrics
from bot.polyaxon import LogLine, LogTail, RunInfo
from bot.runs import RunService, transition_metadata
from bot.settings import FinetuneSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from bot.watch import MAX_REFRESHES_PER_TICK, Watcher
from storage import repos
from storage.db import SessionFactory

REPO = Path(__file__).resolve().parents[3]


class FakeGateway:
    """Statuses and metrics per uuid; counts calls like the real gateway's requests."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {}
        self.metrics: dict[str, tuple[dict[str, float], int | None]] = {}
        self.log_at: dict[str, datetime] = {}
        self.calls: list[str] = []

    def list_active_runs(self) -> list[RunInfo]:
        self.calls.append("list")
        return [
            RunInfo(uuid=u, name=u, status=s)
            for u, s in self.status.items()
            if s not in {"succeeded", "failed", "stopped"}
        ]

    def get_run(self, uuid: str, *, with_conditions: bool = True) -> RunInfo:
        self.calls.append("get")
        return RunInfo(uuid=uuid, name=uuid, status=self.status[uuid])

    def metrics_summary(self, uuid: str) -> tuple[dict[str, float], int | None]:
        self.calls.append("metrics")
        return self.metrics.get(uuid, ({}, None))

    def last_metrics(self, uuid: str) -> dict[str, float]:
        return self.metrics_summary(uuid)[0]

    def tail_logs(self, uuid: str, *, lines: int = 50, since: datetime | None = None) -> LogTail:
        self.calls.append("logs")
        at = self.log_at.get(uuid)
        return LogTail(lines=[LogLine(timestamp=at, value="step")] if at else [])


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


def make_watcher(
    sessions: SessionFactory, standin: SlackStandIn, gateway: FakeGateway, clock: Clock, runs: int
) -> Watcher:
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        finetune=FinetuneSettings(catalog_dir=REPO / "manifests"),
    )
    service = RunService(
        settings=settings,
        sessions=sessions,
        catalog=Catalog.load(REPO / "manifests"),
        gateway=gateway,  # type: ignore[arg-type]
        client=build_web_client(settings, BotMetrics()),
        clock=clock,
    )
    for i in range(runs):
        uuid = f"uuid{i:04d}"
        gateway.status[uuid] = "running"
        with sessions() as s:
            run = repos.create_run(
                s,
                name=f"run-{i}",
                recipe_name="sft-tiny",
                recipe_hash="h",
                component="trl-sft",
                params={},
                presets=[],
                pins={},
                requester="U0ALICE01",
                channel=DEFAULT_CHANNEL,
                status="running",
                polyaxon_uuid=uuid,
                created_at=clock.now,
                last_activity_at=clock.now,
            )
        service.thread.post_card(run)
    return Watcher(runs=service, clock=clock, stuck_after=timedelta(minutes=15), metrics_every=timedelta(0))


def test_one_list_request_per_tick_and_refreshes_capped_least_recent_first(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    gateway, clock = FakeGateway(), Clock()
    total = MAX_REFRESHES_PER_TICK * 2 + 10
    watcher = make_watcher(sessions, standin, gateway, clock, total)
    refreshed: list[set[int]] = []
    for _ in range(3):
        gateway.calls.clear()
        stats = watcher.tick()
        assert gateway.calls.count("list") == 1
        assert stats.refreshed == MAX_REFRESHES_PER_TICK
        assert gateway.calls.count("metrics") == MAX_REFRESHES_PER_TICK
        refreshed.append({run_id for run_id, at in watcher.progress._refreshed_at.items() if at == clock.now})
        clock.now += timedelta(seconds=10)
    # Least recently refreshed first: the first two ticks touch disjoint runs, and three cover all of them.
    assert not refreshed[0] & refreshed[1]
    assert len(set().union(*refreshed)) == total


def test_stuck_is_flagged_once_and_a_finished_run_is_told_once(sessions: SessionFactory, standin: SlackStandIn) -> None:
    gateway, clock = FakeGateway(), Clock()
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    watcher.tick()
    clock.now += timedelta(minutes=20)  # no new metric, no new log line
    assert watcher.tick().stuck_flagged == 1
    clock.now += timedelta(minutes=20)
    assert watcher.tick().stuck_flagged == 0
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
    replies = standin.replies(DEFAULT_CHANNEL, run.card_ts or "")
    assert sum("Possibly stuck" in str(m.get("text")) for m in replies) == 1
    gateway.status["uuid0000"] = "succeeded"
    gateway.metrics["uuid0000"] = ({"eval_loss": 1.5, "loss": 1.2}, 40)
    assert watcher.tick().transitions == 1
    assert watcher.tick().transitions == 0  # no longer active: not asked again
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
    assert (run.status, run.last_step, run.last_metrics["eval_loss"]) == ("succeeded", 40, 1.5)
    replies = standin.replies(DEFAULT_CHANNEL, run.card_ts or "")
    assert sum("*succeeded*" in str(m.get("text")) for m in replies) == 1


def test_a_log_line_counts_as_activity(sessions: SessionFactory, standin: SlackStandIn) -> None:
    gateway, clock = FakeGateway(), Clock()
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    for _ in range(4):
        clock.now += timedelta(minutes=10)
        gateway.log_at["uuid0000"] = clock.now  # the job keeps printing, without new metrics
        assert watcher.tick().stuck_flagged == 0


def test_a_crash_between_post_and_record_is_not_posted_twice(sessions: SessionFactory, standin: SlackStandIn) -> None:
    gateway, clock = FakeGateway(), Clock()
    watcher = make_watcher(sessions, standin, gateway, clock, 2)
    watcher.recover_after = timedelta(0)  # the crash is long past
    with sessions() as s:
        told, untold = sorted(repos.list_recent_runs(s, limit=2), key=lambda r: r.id or 0)
        told_event = repos.record_status(s, told, status="stopping")
        untold_event = repos.record_status(s, untold, status="stopping")
        assert told_event is not None and untold_event is not None
        told_id, untold_id = told_event.id or 0, untold_event.id or 0
    # `told`: the bot posted the transition, then died before recording the post (SIGKILL in between).
    posted_ts = watcher.runs.thread.post_thread(
        told, "Status: *stopping*", purpose="transition", metadata=transition_metadata(told_id, "stopping")
    )
    # `untold`: it died before posting. A post for another event in the same thread must not be mistaken for it.
    watcher.runs.thread.post_thread(
        untold, "Status: *queued*", purpose="transition", metadata=transition_metadata(untold_id + 100, "queued")
    )
    stats = watcher.tick()
    assert stats.recovered_posts == 1
    for run, ts in ((told, posted_ts), (untold, None)):
        stopping = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "*stopping*" in str(m["text"])]
        assert len(stopping) == 1, stopping
        assert ts is None or stopping[0]["ts"] == ts
    with sessions() as s:
        assert list(repos.unposted_status_events(s)) == []
        events = {e.id: e for r in (told, untold) for e in repos.list_status_events(s, run_id=r.id or 0)}
    assert events[told_id].posted_ts == posted_ts
    assert watcher.tick().recovered_posts == 0


def test_a_transition_being_told_right_now_is_left_to_its_teller(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    gateway, clock = FakeGateway(), Clock()
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        assert repos.record_status(s, run, status="stopping") is not None
    # Another thread recorded it a moment ago and is posting it: the tick must not post it as well.
    assert watcher.tick().recovered_posts == 0
    assert not any("*stopping*" in str(m["text"]) for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or ""))
    watcher.recover_after = timedelta(0)  # ...and once it is old, it is a crash's leftover: told once
    assert watcher.tick().recovered_posts == 1
