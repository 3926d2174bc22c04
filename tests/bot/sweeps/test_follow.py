"""Following sweeps with many trials: Polyaxon requests per tick, Slack calls per trial transition, restarts.

A fake gateway stands in for Polyaxon so that a 50-trial sweep is cheap; the same follower runs against the real
local server in tests/e2e/test_sweeps.py.
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
from bot.runs import RunService
from bot.settings import FinetuneSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from bot.sweeps import SweepFollower, SweepService
from bot.sweeps import follow as follow_module
from bot.watch import Watcher
from storage import repos
from storage.db import SessionFactory
from storage.models import Run

REPO = Path(__file__).resolve().parents[3]
CONTRACT = "sha256:contract"
MATRIX = "matrix0001"


class FakeGateway:
    """A matrix and its trials; counts requests like the real gateway."""

    def __init__(self, trials: int) -> None:
        self.matrix = "running"
        self.trials: dict[str, RunInfo] = {
            f"trial{i:03d}": RunInfo(
                uuid=f"trial{i:03d}",
                name="sweep",
                status="queued",
                created_at=datetime(2026, 12, 3, 12, 0, i % 60, tzinfo=UTC) + timedelta(minutes=i // 60),
                inputs={"lr": 0.01 * (i + 1)},
            )
            for i in range(trials)
        }
        self.calls: list[str] = []
        self.stopped: list[str] = []

    def list_active_runs(self, *, page_size: int = 1000) -> list[RunInfo]:
        self.calls.append("list")
        active = [t for t in self.trials.values() if t.status not in ("succeeded", "failed", "stopped")]
        if self.matrix not in ("succeeded", "failed", "stopped"):
            active.append(RunInfo(uuid=MATRIX, name="sweep", status=self.matrix))
        return active

    def last_change(self) -> datetime:
        self.calls.append("cursor")
        return datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

    def list_changed_runs(self, since: datetime, *, page_size: int = 1000) -> list[RunInfo]:
        self.calls.append("list")
        return [RunInfo(uuid=MATRIX, name="sweep", status=self.matrix)]  # the matrix changes with its trials

    def get_run(self, uuid: str, *, with_conditions: bool = True) -> RunInfo:
        self.calls.append("get")
        return RunInfo(uuid=MATRIX, name="sweep", status=self.matrix)

    def list_children(self, uuid: str) -> list[RunInfo]:
        self.calls.append("children")
        return [t.model_copy() for t in self.trials.values()]

    def tail_logs(self, uuid: str, *, lines: int = 50, since: datetime | None = None) -> LogTail:
        self.calls.append("logs")
        at = datetime(2026, 12, 3, tzinfo=UTC)
        return LogTail(lines=[LogLine(timestamp=at, value=f"ValueError: Invalid learning rate ({uuid})")])

    def stop(self, uuid: str) -> None:
        self.calls.append("stop")
        self.stopped.append(uuid)
        self.matrix = "stopping"

    def finish(self, uuid: str, status: str, *, accuracy: float | None = None, at: int = 0) -> None:
        outputs = {"accuracy": accuracy, "eval_contract_hash": CONTRACT} if accuracy is not None else {}
        finished = datetime(2026, 12, 3, 13, 0, tzinfo=UTC) + timedelta(seconds=at)
        self.trials[uuid] = self.trials[uuid].model_copy(
            update={"status": status, "outputs": outputs, "finished_at": finished}
        )


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def no_edit_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tick may edit the leaderboard (the throttle is wall-clock; the ticks here are instant)."""
    monkeypatch.setattr(follow_module, "LEADERBOARD_MIN_INTERVAL_S", 0.0)


def build(sessions: SessionFactory, standin: SlackStandIn, gateway: FakeGateway) -> tuple[Watcher, Run]:
    """A watcher with a sweep follower over one recorded 'running' sweep whose card is posted."""
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        finetune=FinetuneSettings(catalog_dir=REPO / "manifests"),
    )
    runs = RunService(
        settings=settings,
        sessions=sessions,
        catalog=Catalog.load(REPO / "manifests"),
        gateway=gateway,  # type: ignore[arg-type]
        client=build_web_client(settings, BotMetrics()),
        clock=lambda: datetime(2026, 12, 3, 14, 0, tzinfo=UTC),
    )
    sweeps = SweepService(runs.deps, runs.thread, runs.submitter, runs.comparer)
    with sessions() as s:
        run = repos.create_run(
            s,
            name="quickstart-sweep-0123456789",
            kind="sweep",
            recipe_name="quickstart",
            recipe_hash="h",
            component="quickstart",
            params={"epochs": 1},
            presets=["cpu-small"],
            pins={},
            eval_contract={"metrics": ["accuracy", "loss"]},
            eval_contract_hash=CONTRACT,
            requester="U0ALICE01",
            channel=DEFAULT_CHANNEL,
            status="running",
            polyaxon_uuid=MATRIX,
        )
        repos.create_sweep(
            s,
            run_id=run.id or 0,
            mode="grid",
            space=[{"key": "lr", "input": "lr", "kind": "choice", "values": []}],
            trials=len(gateway.trials),
            concurrency=4,
            metric="accuracy",
            higher_is_better=True,
            failure_cutoff=3,
        )
    runs.thread.post_card(run)
    watcher = Watcher(
        runs=runs,
        sweeps=SweepFollower(runs.deps, runs.thread, sweeps),
        clock=lambda: datetime(2026, 12, 3, 14, 0, tzinfo=UTC),
        stuck_after=timedelta(hours=1),
    )
    return watcher, run


@pytest.mark.parametrize("trials", [1, 50], ids=["1-trial", "50-trials"])
def test_a_tick_costs_two_polyaxon_requests_whatever_the_number_of_trials(
    sessions: SessionFactory, standin: SlackStandIn, trials: int
) -> None:
    gateway = FakeGateway(trials)
    watcher, run = build(sessions, standin, gateway)
    for uuid in list(gateway.trials)[: trials // 2 + 1]:
        gateway.trials[uuid] = gateway.trials[uuid].model_copy(update={"status": "running"})
    watcher.tick()  # the first tick also reads the change feed's cursor
    for _ in range(3):
        gateway.calls.clear()
        stats = watcher.tick()
        # The project's changed runs (shared with every run) and the matrix's children: nothing per trial.
        assert sorted(gateway.calls) == ["children", "list"], gateway.calls
        assert stats.polyaxon_requests == 2
    with sessions() as s:
        assert len(repos.sweep_trials(s, sweep_run_id=run.id or 0)) == trials
        assert repos.list_active_runs(s) == [repos.get_run(s, run_id=run.id or 0)]  # trials are the sweep's


def test_the_leaderboard_is_posted_once_then_edited_per_trial_transition_and_never_reposted_after_a_restart(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    gateway = FakeGateway(3)
    watcher, run = build(sessions, standin, gateway)
    watcher.tick()
    posts_before = len(standin.calls("chat.postMessage"))
    for at, (uuid, accuracy) in enumerate((("trial000", 0.91), ("trial001", 0.97), ("trial002", 0.95))):
        gateway.trials[uuid] = gateway.trials[uuid].model_copy(update={"status": "running"})
        watcher.tick()
        gateway.finish(uuid, "succeeded", accuracy=accuracy, at=at)
        watcher.tick()
    assert len(standin.calls("chat.postMessage")) == posts_before  # six trial transitions, no post
    with sessions() as s:
        sweep = repos.get_sweep(s, run_id=run.id or 0)
    assert sweep is not None and sweep.leaderboard_ts is not None
    edits = [c for c in standin.calls("chat.update") if c["ts"] == sweep.leaderboard_ts]
    assert len(edits) == 6  # one per trial transition
    board = standin.message(DEFAULT_CHANNEL, sweep.leaderboard_ts)
    [table] = [block for block in board["blocks"] if block["type"] == "table"]
    assert [row[0]["text"] for row in table["rows"][1:3]] == ["#1", "#2"]
    assert table["rows"][2][1]["text"] == "quickstart-sweep-0123456789-t3"  # #1 is bold with its trophy
    assert board["text"].index("#1 `quickstart-sweep-0123456789-t2`") < board["text"].index("#2 `quickstart-sweep")
    # A restarted bot (a new watcher on the same database) edits the same leaderboard; it posts none.
    restarted, _ = build_again(sessions, standin, gateway, watcher)
    gateway.matrix = "succeeded"
    restarted.tick()
    with sessions() as s:
        sweep = repos.get_sweep(s, run_id=run.id or 0)
    assert sweep is not None and sweep.summary_ts is not None
    boards = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "Leaderboard" in str(m["text"])]
    assert len(boards) == 1
    summaries = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "the sweep *succeeded*" in m["text"]]
    assert len(summaries) == 1 and "<@U0ALICE01>" in summaries[0]["text"]
    told = len(standin.replies(DEFAULT_CHANNEL, run.card_ts or ""))
    gateway.calls.clear()
    restarted.tick()  # ended and summed up: no longer followed, nothing more said
    assert "children" not in gateway.calls
    assert len(standin.replies(DEFAULT_CHANNEL, run.card_ts or "")) == told
    with sessions() as s:
        assert repos.followed_sweeps(s) == []


def test_a_sweep_of_150_trials_shows_99_in_its_table_and_posts_the_whole_leaderboard_as_csv_once(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    gateway = FakeGateway(150)
    watcher, run = build(sessions, standin, gateway)
    watcher.tick()
    for at, uuid in enumerate(gateway.trials):
        gateway.finish(uuid, "succeeded", accuracy=round(0.5 + at / 1000, 3), at=at)
    watcher.tick()
    with sessions() as s:
        sweep = repos.get_sweep(s, run_id=run.id or 0)
    assert sweep is not None and sweep.leaderboard_ts is not None
    blocks = standin.message(DEFAULT_CHANNEL, sweep.leaderboard_ts)["blocks"]
    [table] = [block for block in blocks if block["type"] == "table"]
    assert len(table["rows"]) == 100 and table["rows"][1][0]["text"] == "#1"
    assert "the first 99 of 150 trials" in str(blocks) and "when the sweep ends" in str(blocks)
    assert not [f for f in standin.files() if f["name"].endswith(".csv")]  # not while the sweep runs
    gateway.matrix = "succeeded"
    watcher.tick()
    watcher.tick()
    [csv_file] = [f for f in standin.files() if f["name"].endswith(".csv")]
    assert csv_file["name"] == "quickstart-sweep-0123456789-leaderboard.csv"
    assert csv_file["thread_ts"] == run.card_ts
    lines = csv_file["content"].decode().splitlines()
    assert lines[0] == "#,trial,lr,status,accuracy" and len(lines) == 151
    assert lines[1].startswith("#1,quickstart-sweep-0123456789-t150 :trophy:,1.5,succeeded,0.649")
    blocks = standin.message(DEFAULT_CHANNEL, sweep.leaderboard_ts)["blocks"]
    assert "the whole leaderboard is in this thread as a CSV file" in str(blocks)


def build_again(
    sessions: SessionFactory, standin: SlackStandIn, gateway: FakeGateway, old: Watcher
) -> tuple[Watcher, SweepService]:
    """A second process's watcher over the same database (nothing kept in memory from the first)."""
    runs = RunService(
        settings=old.runs.settings,
        sessions=sessions,
        catalog=old.runs.deps.catalog,
        gateway=gateway,  # type: ignore[arg-type]
        client=old.runs.client,
        clock=old.clock,
    )
    sweeps = SweepService(runs.deps, runs.thread, runs.submitter, runs.comparer)
    watcher = Watcher(
        runs=runs, sweeps=SweepFollower(runs.deps, runs.thread, sweeps), clock=old.clock, stuck_after=timedelta(1)
    )
    return watcher, sweeps


def test_three_failures_in_finishing_order_stop_the_matrix_once_and_the_first_cause_is_told_once(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    gateway = FakeGateway(6)
    watcher, run = build(sessions, standin, gateway)
    gateway.finish("trial000", "failed", at=1)
    gateway.finish("trial001", "succeeded", accuracy=0.9, at=2)  # breaks the streak
    gateway.finish("trial003", "failed", at=3)
    gateway.finish("trial002", "failed", at=4)
    watcher.tick()
    assert gateway.stopped == []  # two in a row so far
    gateway.finish("trial004", "failed", at=5)
    watcher.tick()
    watcher.tick()
    assert gateway.stopped == [MATRIX]
    assert gateway.calls.count("logs") == 1  # the first failure's log tail, read once
    with sessions() as s:
        sweep = repos.get_sweep(s, run_id=run.id or 0)
    assert sweep is not None and sweep.stop_reason is not None
    assert "3 trials failed in a row (quickstart-sweep-0123456789-t4, quickstart-sweep-0123456789-t3" in (
        sweep.stop_reason
    )
    thread = [str(m["text"]) for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "")]
    first = [t for t in thread if "the sweep's first failure" in t]
    assert len(first) == 1 and "quickstart-sweep-0123456789-t1" in first[0] and "Invalid learning rate" in first[0]
    assert sum("Stopping the sweep" in t for t in thread) == 1


def test_a_sweep_cancelled_before_polyaxon_had_it_is_summed_up_once_and_no_longer_followed(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    gateway = FakeGateway(2)
    watcher, run = build(sessions, standin, gateway)
    with sessions() as s:
        fresh = repos.get_run(s, run_id=run.id or 0)
        assert fresh is not None
        repos.update_run(s, fresh, polyaxon_uuid=None, status="pending_submit")
    sweeps = SweepService(watcher.runs.deps, watcher.runs.thread, watcher.runs.submitter, watcher.runs.comparer)
    with sessions() as s:
        pending = repos.get_run(s, run_id=run.id or 0)
    assert pending is not None
    assert sweeps.stop(pending, user="U0ALICE01").text.startswith("Cancelled sweep")  # held: never in Polyaxon
    watcher.tick()
    watcher.tick()
    thread = [str(m["text"]) for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "")]
    assert sum("the sweep *stopped*" in t for t in thread) == 1
    assert "children" not in gateway.calls and gateway.stopped == []
    with sessions() as s:
        assert repos.followed_sweeps(s) == []
