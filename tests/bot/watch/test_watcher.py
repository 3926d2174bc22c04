"""The watcher's bookkeeping with many runs: a tick's requests do not grow with the runs, stuck once, told once.

A fake gateway stands in for Polyaxon here to make thousands of runs cheap (it answers like the real one: a list
of changed runs compared to the second, `updated_at` moved by status changes and outputs syncs); the same
watcher runs against the real server in tests/e2e (lifecycle, restart, failover, outage) and in bench/watcher.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.catalog import Catalog
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.metrics import BotMetrics
from bot.polyaxon import GatewayError, LogTail, MetricPoint, RunInfo, StatusCondition
from bot.runs import RunService, transition_metadata
from bot.runs.card_edits import CardEdits
from bot.settings import FinetuneSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from bot.watch import Watcher
from bot.watch.changes import next_cursor
from storage import repos
from storage.db import SessionFactory
from tests.fixtures.runs import create_run

REPO = Path(__file__).resolve().parents[3]
DONE = {"succeeded", "failed", "stopped"}


class FakeGateway:
    """Runs by uuid with Polyaxon's `updated_at` bookkeeping; counts requests like the real gateway makes them."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.runs: dict[str, RunInfo] = {}
        self.metrics: dict[str, tuple[dict[str, float], int | None]] = {}
        self.history: dict[str, dict[str, list[MetricPoint]]] = {}  # by uuid, what its metrics' events hold
        self.calls: list[str] = []

    def put(
        self, uuid: str, *, status: str | None = None, outputs: dict[str, Any] | None = None, ago_s: float = 0
    ) -> None:
        """What Polyaxon does on a status change or an outputs sync: the run changes and `updated_at` moves."""
        run = self.runs.get(uuid) or RunInfo(uuid=uuid, name=uuid, status="running")
        step = (outputs or {}).get("global_step")
        if isinstance(step, int):  # a metrics row: its events in the history too, as the trainer's tracking writes
            history = self.history.setdefault(uuid, {})
            for name, value in (outputs or {}).items():
                if isinstance(value, float) and name != "global_step":
                    point = MetricPoint(step=step, timestamp=self.clock.now - timedelta(seconds=ago_s), value=value)
                    history.setdefault(name.replace("/", "__"), []).append(point)
        self.runs[uuid] = run.model_copy(
            update={
                "status": status or run.status,
                "outputs": {**run.outputs, **(outputs or {})},
                "updated_at": self.clock.now - timedelta(seconds=ago_s),
            }
        )

    def _pages(self, runs: list[RunInfo], page_size: int) -> list[RunInfo]:
        self.calls += ["list"] * (len(runs) // page_size + 1)
        return runs

    def last_change(self) -> datetime | None:
        self.calls.append("cursor")
        return max((r.updated_at for r in self.runs.values() if r.updated_at), default=None)

    def list_active_runs(self, *, page_size: int = 1000) -> list[RunInfo]:
        return self._pages([r for r in self.runs.values() if r.status not in DONE], page_size)

    def list_changed_runs(self, since: datetime, *, page_size: int = 1000) -> list[RunInfo]:
        changed = sorted((r for r in self.runs.values() if r.updated_at and r.updated_at >= since), key=_updated)
        return self._pages(changed, page_size)

    def get_run(self, uuid: str, *, with_conditions: bool = True) -> RunInfo:
        self.calls += ["get", "conditions"] if with_conditions else ["get"]
        return self.runs[uuid].model_copy()

    def run_conditions(self, uuid: str) -> list[StatusCondition]:
        self.calls.append("conditions")
        return [StatusCondition(type=self.runs[uuid].status, reason="Agent", message=None)]

    def metrics_summary(self, uuid: str) -> tuple[dict[str, float], int | None]:
        self.calls.append("metrics")
        return self.metrics.get(uuid, ({}, None))

    def metric_history(self, uuid: str, names: list[str], *, max_points: int = 200) -> dict[str, list[MetricPoint]]:
        self.calls.append("history")
        return {name: points for name, points in self.history.get(uuid, {}).items() if name in names}

    def tail_logs(self, uuid: str, *, lines: int = 50, since: datetime | None = None) -> LogTail:
        self.calls.append("logs")
        return LogTail(lines=[])


def _updated(run: RunInfo) -> datetime:
    assert run.updated_at is not None
    return run.updated_at


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
    # The card-edit throttle on the test's clock, so "a few seconds later" is the test's to say.
    service.thread.edits = CardEdits(monotonic=lambda: clock.now.timestamp())
    for i in range(runs):
        uuid = f"uuid{i:04d}"
        gateway.put(uuid, status="running", ago_s=runs - i)  # submitted over the last minutes
        with sessions() as s:
            run = create_run(
                s,
                f"run-{i}",
                status="running",
                polyaxon_uuid=uuid,
                created_at=clock.now,
                last_activity_at=clock.now,
            )
        service.thread.post_card(run)
    return Watcher(runs=service, clock=clock, stuck_after=timedelta(minutes=15))


@pytest.mark.parametrize("total", [10, 1200])
def test_a_tick_makes_the_same_requests_whatever_the_number_of_active_runs(
    sessions: SessionFactory, standin: SlackStandIn, total: int
) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, total)
    first = watcher.tick()
    # The first tick lists every active run (one request per 1,000) after reading the cursor.
    assert gateway.calls == ["cursor"] + ["list"] * (total // 1000 + 1)
    assert first.polyaxon_requests == len(gateway.calls) and first.transitions == 0
    for _ in range(3):  # nothing changed in Polyaxon: one request, whatever the number of runs
        clock.now += timedelta(seconds=5)
        gateway.calls.clear()
        stats = watcher.tick()
        assert gateway.calls == ["list"] and stats.polyaxon_requests == 1 and stats.refreshed == 0
    # Three runs log metrics (an outputs sync), one ends: still one list, plus what the ending needs.
    clock.now += timedelta(seconds=5)
    for i in range(3):
        gateway.put(f"uuid{i:04d}", outputs={"loss": 2.0 - i / 10, "global_step": 10 * (i + 1)})
    gateway.put(f"uuid{total - 1:04d}", status="succeeded")
    gateway.calls.clear()
    stats = watcher.tick()
    assert sorted(gateway.calls) == ["conditions", "list", "metrics"]
    assert (stats.refreshed, stats.transitions) == (3, 1)
    with sessions() as s:
        runs = {r.polyaxon_uuid: r for r in repos.list_recent_runs(s, limit=total)}
    assert (runs["uuid0002"].last_metrics, runs["uuid0002"].last_step) == ({"loss": 1.8}, 30)
    assert runs[f"uuid{total - 1:04d}"].status == "succeeded"
    # The card shows the metrics the listing carried, without a request for them.
    card = standin.message(DEFAULT_CHANNEL, runs["uuid0002"].card_ts or "")
    assert "1.8" in str(card["blocks"])


def test_a_waiting_run_listed_again_costs_nothing_unless_its_conditions_went_unread(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    gateway.put("wait0000", status="queued")  # the newest change: every list from the cursor shows it again
    with sessions() as s:
        create_run(
            s,
            "waiting-0",
            status="queued",
            polyaxon_uuid="wait0000",
        )
    read = gateway.run_conditions

    def unreachable(uuid: str) -> list[StatusCondition]:
        raise GatewayError("Polyaxon answered 502")

    gateway.run_conditions = unreachable  # type: ignore[method-assign]
    assert watcher.tick().errors == ["waiting runs: Polyaxon answered 502"]
    gateway.run_conditions = read  # type: ignore[method-assign]
    # Its conditions went unread: listed again (the cursor's overlap), it is read again...
    for calls in (["list", "conditions"], ["list"]):  # ...and once handled, listed again it costs nothing
        clock.now += timedelta(seconds=5)
        gateway.calls.clear()
        stats = watcher.tick()
        assert (gateway.calls, stats.polyaxon_requests, stats.errors) == (calls, len(calls), [])


def test_a_change_committed_seconds_after_its_stamp_is_still_listed(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    # Polyaxon stamps `updated_at` before its transaction commits: on a busy server a status write can wait seconds
    # for the database and land behind a newer change the watcher already listed. A 1 s overlap missed it until
    # the next full list (10 minutes on): one run in 500 stayed "created" on its card while Polyaxon said queued.
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 2)
    watcher.tick()  # the full list: the cursor is the newest change
    clock.now += timedelta(seconds=10)
    gateway.put("uuid0000", outputs={"loss": 1.5, "global_step": 5})  # listed by the next tick: the cursor moves
    assert watcher.tick().refreshed == 1
    clock.now += timedelta(seconds=10)
    gateway.put("uuid0001", status="succeeded", ago_s=12)  # stamped 2 s before the change listed last, committed now
    gateway.calls.clear()
    stats = watcher.tick()
    assert stats.transitions == 1 and sorted(gateway.calls) == ["conditions", "list", "metrics"], gateway.calls
    with sessions() as s:
        assert repos.get_run_by_name(s, name="run-1").status == "succeeded"  # type: ignore[union-attr]
    # Listed again within the overlap once handled, it costs nothing.
    clock.now += timedelta(seconds=10)
    gateway.calls.clear()
    assert (watcher.tick().transitions, gateway.calls) == (0, ["list"])


def test_the_cursor_never_passes_a_run_a_paged_list_may_have_missed() -> None:
    base = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    listed = [
        RunInfo(uuid=f"u{i}", name="r", status="running", updated_at=base + timedelta(seconds=i)) for i in range(5)
    ]
    assert next_cursor(None, listed, page_size=10) == base + timedelta(seconds=4)  # one page: its newest
    # Two pages (page size 3): a run changed while they were read may have pushed another past the boundary.
    assert next_cursor(None, listed, page_size=3) == base + timedelta(seconds=2)
    assert next_cursor(base + timedelta(seconds=9), listed, page_size=10) == base + timedelta(seconds=9)  # never back
    assert next_cursor(base, [], page_size=10) == base


def test_stuck_is_flagged_once_and_a_finished_run_is_told_once(sessions: SessionFactory, standin: SlackStandIn) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    watcher.tick()
    clock.now += timedelta(minutes=20)  # no new metric, no change in Polyaxon
    assert watcher.tick().stuck_flagged == 1
    clock.now += timedelta(minutes=20)
    assert watcher.tick().stuck_flagged == 0
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
    replies = standin.replies(DEFAULT_CHANNEL, run.card_ts or "")
    assert sum("Possibly stuck" in str(m.get("text")) for m in replies) == 1
    gateway.put("uuid0000", status="succeeded")
    gateway.metrics["uuid0000"] = ({"eval_loss": 1.5, "loss": 1.2}, 40)
    assert watcher.tick().transitions == 1
    assert watcher.tick().transitions == 0  # no longer active: not asked again
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
    assert (run.status, run.last_step, run.last_metrics["eval_loss"]) == ("succeeded", 40, 1.5)
    replies = standin.replies(DEFAULT_CHANNEL, run.card_ts or "")
    assert sum("*succeeded*" in str(m.get("text")) for m in replies) == 1


def test_a_run_polyaxon_keeps_changing_is_not_stuck(sessions: SessionFactory, standin: SlackStandIn) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    for step in range(4):
        clock.now += timedelta(minutes=10)
        gateway.put("uuid0000", outputs={"loss": 1.0, "global_step": step})  # synced metrics, even unchanged ones
        assert watcher.tick().stuck_flagged == 0
    clock.now += timedelta(minutes=16)
    assert watcher.tick().stuck_flagged == 1


def test_a_run_that_ended_while_the_bot_was_down_is_read_once(sessions: SessionFactory, standin: SlackStandIn) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
    make_watcher(sessions, standin, gateway, clock, 2)
    gateway.put("uuid0001", status="failed")
    # A new process: its first tick lists the active runs; the run no longer among them is read on its own.
    watcher = make_watcher(sessions, standin, gateway, clock, 0)
    gateway.calls.clear()
    stats = watcher.tick()
    assert stats.transitions == 1
    assert gateway.calls.count("get") == 1 and gateway.calls.count("list") == 1
    with sessions() as s:
        assert {r.polyaxon_uuid: r.status for r in repos.list_recent_runs(s, limit=2)}["uuid0001"] == "failed"


def test_a_crash_between_post_and_record_is_not_posted_twice(sessions: SessionFactory, standin: SlackStandIn) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
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
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        assert repos.record_status(s, run, status="stopping") is not None
    # Another thread recorded it a moment ago and is posting it: the tick must not post it as well.
    assert watcher.tick().recovered_posts == 0
    assert not any("*stopping*" in str(m["text"]) for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or ""))
    watcher.recover_after = timedelta(0)  # ...and once it is old, it is a crash's leftover: told once
    assert watcher.tick().recovered_posts == 1


@pytest.mark.parametrize("ending", ["stopped", "failed"])
def test_a_run_that_ended_has_its_latest_figures_read_again_however_it_ended(
    sessions: SessionFactory, standin: SlackStandIn, ending: str
) -> None:
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    clock.now += timedelta(seconds=10)
    gateway.put("uuid0000", outputs={"loss": 3.0, "eval_loss": 2.458, "global_step": 35})
    watcher.tick()  # the card shows step 35 while it runs
    # It logged on to step 41 and ended before the watcher listed it again (a stop between two ticks).
    clock.now += timedelta(seconds=10)
    gateway.put("uuid0000", status=ending)
    gateway.metrics["uuid0000"] = ({"loss": 1.2, "eval_loss": 1.538}, 41)
    assert watcher.tick().transitions == 1
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
    assert (run.status, run.last_step, run.last_metrics["eval_loss"]) == (ending, 41, 1.538)
    card = str(standin.message(DEFAULT_CHANNEL, run.card_ts or "").get("blocks"))
    assert "step 41" in card and "eval_loss `1.538`" in card and "2.458" not in card, card


def test_a_nan_is_told_once_with_its_evidence_and_a_recipe_that_says_stop_stops_the_run(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    from bot.catalog.alerts import AlertsSpec, trainer_alerts

    clock = Clock()
    gateway = FakeGateway(clock)
    stopped: list[str] = []
    gateway.stop = stopped.append  # type: ignore[attr-defined]
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        alerts = trainer_alerts("sft", AlertsSpec.model_validate({"nan": "stop"}))
        repos.update_run(s, run, policy={"alerts": alerts, "trainer": "sft"}, params={"max_steps": 300})
    for step, loss in ((10, 3.0), (20, 2.5)):
        clock.now += timedelta(seconds=10)
        gateway.put("uuid0000", outputs={"loss": loss, "global_step": step, "checkpoint_latest_step": step})
        watcher.tick()
    card = str(standin.message(DEFAULT_CHANNEL, run.card_ts or "").get("blocks"))
    assert "step 20/300" in card and "ETA" in card and "Alerts" not in card, card  # the pace, no badge
    for step in (30, 40):  # the NaN stays the last value of the count: told once
        clock.now += timedelta(seconds=10)
        gateway.put(
            "uuid0000",
            outputs={"loss": 2.4, "global_step": step, "nonfinite_values": 1.0, "nonfinite_keys": "grad_norm, loss",
                     "checkpoints": ["checkpoint-10", "checkpoint-20"], "checkpoint_latest_step": 20},
        )  # fmt: skip
        watcher.tick()
    posts = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "*NaN*" in str(m.get("text"))]
    assert len(posts) == 1, posts
    text = str(posts[0]["text"])
    assert "grad_norm, loss at step 30" in text and "Stopped by the recipe's `alerts: {nan: stop}`" in text, text
    assert f"/finetune resume {run.name} checkpoint=step-20" in text, text
    assert stopped == ["uuid0000"]
    card = str(standin.message(DEFAULT_CHANNEL, run.card_ts or "").get("blocks"))
    assert ":rotating_light: *Alerts*: NaN" in card, card
    with sessions() as s:
        audit = [a for a in repos.list_audit(s, limit=20) if a.command == f"stop {run.name}"]
    assert audit and audit[0].user == "finetune-bot" and "nan: stop" in (audit[0].detail or ""), audit


def test_an_alert_without_stop_offers_the_stop_button_and_stops_nothing(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    from bot.catalog.alerts import trainer_alerts

    clock = Clock()
    gateway = FakeGateway(clock)
    stopped: list[str] = []
    gateway.stop = stopped.append  # type: ignore[attr-defined]
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        repos.update_run(s, run, policy={"alerts": trainer_alerts("grpo", None), "trainer": "grpo"})
    for step in (2, 4, 6, 8):
        clock.now += timedelta(seconds=10)
        gateway.put("uuid0000", outputs={"loss": 0.1, "global_step": step, "completions/clipped_ratio": 1.0})
        watcher.tick()
    [post] = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "truncated" in str(m.get("text"))]
    assert "completions/clipped_ratio `1` at step 6" in str(post["text"]), post["text"]
    buttons = [e for b in post.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]]
    assert [b["text"]["text"] for b in buttons] == ["Stop"] and stopped == []


def test_rows_logged_between_two_ticks_each_count_in_an_alerts_window(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    """A run that logs faster than the watcher ticks: its window counts its logs (read from the metrics' history
    when the step moved), not the ticks; an unchanged run costs no history request."""
    from bot.catalog.alerts import trainer_alerts

    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        repos.update_run(s, run, policy={"alerts": trainer_alerts("grpo", None), "trainer": "grpo"})
    logged = [clock.now + timedelta(seconds=step) for step in range(1, 5)]
    gateway.history["uuid0000"] = {
        "completions__clipped_ratio": [MetricPoint(step=i + 1, timestamp=t, value=1.0) for i, t in enumerate(logged)],
        "loss": [MetricPoint(step=i + 1, timestamp=t, value=0.1) for i, t in enumerate(logged)],
    }
    clock.now += timedelta(seconds=10)  # four rows logged since the run started; the watcher sees the last
    gateway.put("uuid0000", outputs={"loss": 0.1, "global_step": 4, "completions__clipped_ratio": 1.0})
    watcher.tick()
    [post] = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "truncated" in str(m.get("text"))]
    # The window is 3 logs: the third row, step 3, is where it fired.
    assert "completions/clipped_ratio `1` at step 3" in str(post["text"]), post["text"]
    assert gateway.calls.count("history") == 1
    clock.now += timedelta(seconds=10)
    watcher.tick()  # nothing changed: no request for the history
    assert gateway.calls.count("history") == 1


def test_a_run_that_ended_between_two_looks_is_told_what_its_last_rows_showed(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    """The rows written as the run closed (Polyaxon's client writes the history every 10 s, and on close) go
    through the rules when it ends: the alert is told, with no Stop button on a run that is over."""
    from bot.catalog.alerts import trainer_alerts

    clock = Clock()
    gateway = FakeGateway(clock)
    stopped: list[str] = []
    gateway.stop = stopped.append  # type: ignore[attr-defined]
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        repos.update_run(s, run, policy={"alerts": trainer_alerts("grpo", None), "trainer": "grpo"})
    clock.now += timedelta(seconds=10)
    gateway.put("uuid0000", outputs={"loss": 0.1, "global_step": 1, "completions__clipped_ratio": 1.0})
    watcher.tick()
    for step in (2, 3, 4):  # logged, and the run ended, before the next look
        gateway.put("uuid0000", outputs={"loss": 0.1, "global_step": step, "completions__clipped_ratio": 1.0})
    gateway.metrics["uuid0000"] = ({"loss": 0.1, "completions__clipped_ratio": 1.0}, 4)
    clock.now += timedelta(seconds=10)
    gateway.put("uuid0000", status="succeeded")
    watcher.tick()
    [post] = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "truncated" in str(m.get("text"))]
    assert "at step 3" in str(post["text"]), post["text"]
    assert not [b for b in post.get("blocks") or [] if b.get("type") == "actions"] and stopped == []
