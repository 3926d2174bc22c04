"""`logs RUN follow` as a service: polls of a fake gateway into the stand-in's streamed messages, one follow per run.

The gateway is a fake so that the log can grow between polls at the test's pace; the polls are driven one by one
(`FollowLoop.step`) on the test's clock. The same follow runs against the real server in tests/e2e.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.catalog import Catalog
from bot.follow import FollowLoop, FollowTiming, LogFollower
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.metrics import BotMetrics
from bot.polyaxon import GatewayError, LogLine, LogTail
from bot.runs import RunError, RunService
from bot.settings import FinetuneSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from storage import repos
from storage.db import SessionFactory
from storage.models import Run
from tests.fixtures.runs import create_run

REPO = Path(__file__).resolve().parents[3]
C = DEFAULT_CHANNEL
ALICE, BOB = "U0ALICE01", "U0BOB0001"
# Polls never come on their own here: the test steps each follow (a follow's thread waits this long).
NEVER = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class GrowingLog:
    """A fake gateway whose run log grows when the test says so, and that can be made unreachable."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lines: list[LogLine] = []
        self.down = False
        self.reads = 0

    def add(self, *values: str) -> None:
        self.lines += [LogLine(timestamp=self.clock.now, value=v) for v in values]

    def tail_logs(self, uuid: str, *, lines: int = 50, since: datetime | None = None) -> LogTail:
        self.reads += 1
        if self.down:
            raise GatewayError("read the logs: connection refused")
        return LogTail(lines=self.lines[-lines:], total=len(self.lines))


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gateway(clock: Clock) -> GrowingLog:
    return GrowingLog(clock)


@pytest.fixture
def service(sessions: SessionFactory, standin: SlackStandIn, gateway: GrowingLog, clock: Clock) -> RunService:
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        finetune=FinetuneSettings(catalog_dir=REPO / "manifests"),
    )
    return RunService(
        settings=settings,
        sessions=sessions,
        catalog=Catalog.load(REPO / "manifests"),
        gateway=gateway,  # type: ignore[arg-type]
        client=build_web_client(settings, BotMetrics()),
        clock=clock,
    )


@pytest.fixture
def run(service: RunService) -> Run:
    with service.sessions() as s:
        run = create_run(s, "sft-tiny-follow", status="running", polyaxon_uuid="uuid-follow", channel=C)
    service.thread.post_card(run)
    with service.sessions() as s:
        stored = repos.get_run(s, run_id=run.id)
    assert stored is not None and stored.card_ts
    return stored


def follower(service: RunService, holder: str, **timing: object) -> Iterator[LogFollower]:
    follows = LogFollower(service.thread, holder=holder, timing=FollowTiming(poll_s=NEVER, **timing))  # type: ignore[arg-type]
    yield follows
    follows.shutdown()


@pytest.fixture
def follows(service: RunService) -> Iterator[LogFollower]:
    yield from follower(service, "replica-a")


@pytest.fixture
def other(service: RunService) -> Iterator[LogFollower]:
    yield from follower(service, "replica-b")


def the_loop(follows: LogFollower) -> FollowLoop:
    [loop] = follows._loops.values()
    return loop


def streamed(standin: SlackStandIn, run: Run) -> list[dict[str, object]]:
    assert run.card_ts
    return [m for m in standin.replies(C, run.card_ts) if standin.stream_state(C, str(m["ts"])) is not None]


def set_status(service: RunService, run: Run, status: str) -> None:
    with service.sessions() as s:
        stored = s.get(Run, run.id)
        assert stored is not None
        stored.status = status
        s.add(stored)
        s.commit()


def test_a_follow_streams_new_lines_in_order_once_and_stops_when_the_run_ends(
    service: RunService, follows: LogFollower, standin: SlackStandIn, gateway: GrowingLog, run: Run, clock: Clock
) -> None:
    gateway.add(*[f"early {i}" for i in range(25)])
    reply = follows.follow(run.name, user=ALICE)
    assert "Streaming `sft-tiny-follow`'s log <https://" in reply.text and "10 minutes at most" in reply.text
    [message] = streamed(standin, run)
    assert "5 earlier lines not shown" in str(message["text"]) and "early 4\n" not in str(message["text"])
    loop = the_loop(follows)
    gateway.add("step 1 loss=2.1", "step 2 loss=1.9")
    clock.now += timedelta(seconds=3)
    assert loop.step()
    appends = len(standin.calls("chat.appendStream"))
    clock.now += timedelta(seconds=3)
    assert loop.step()  # nothing new: nothing appended
    assert len(standin.calls("chat.appendStream")) == appends
    gateway.add(f"token={standin.bot_token}")
    set_status(service, run, "succeeded")
    gateway.add("done")  # written before the end, read after it: still streamed
    clock.now += timedelta(seconds=3)
    assert not loop.step()
    [message] = streamed(standin, run)
    text = str(message["text"])
    assert standin.stream_state(C, str(message["ts"])) == "stopped"
    lines = [f"early {i}" for i in range(5, 25)] + ["step 1 loss=2.1", "step 2 loss=1.9"]
    positions = [text.index(line + "\n") for line in lines]
    assert positions == sorted(positions) and all(text.count(line + "\n") == 1 for line in lines)
    assert standin.bot_token not in text and "done\n" in text
    assert text.endswith(":checkered_flag: The run ended with status **succeeded**.")
    assert len(standin.calls("chat.startStream")) == 1 and len(standin.calls("chat.stopStream")) == 1
    with service.sessions() as s:
        row = repos.get_follow(s, run_id=run.id)
    assert row is not None and row.state == "stopped" and row.lines_sent == 29


def test_one_follow_per_run_across_replicas(
    service: RunService,
    follows: LogFollower,
    other: LogFollower,
    standin: SlackStandIn,
    gateway: GrowingLog,
    run: Run,
    clock: Clock,
) -> None:
    gateway.add("one")
    follows.follow(run.name, user=ALICE)
    again = other.follow(run.name, user=BOB)
    assert again.text.startswith("`sft-tiny-follow`'s log is already streaming: <https://")
    assert "One follow per run at a time" in again.text
    assert len(standin.calls("chat.startStream")) == 1
    set_status(service, run, "stopped")
    assert not the_loop(follows).step()
    assert str(streamed(standin, run)[0]["text"]).endswith(":octagonal_sign: The run was stopped.")
    # Once it stopped, the run may be followed again (here refused: a stopped run's log will not grow).
    with pytest.raises(RunError, match="has already stopped: its log will not grow"):
        other.follow(run.name, user=BOB)


def test_a_dead_replicas_follow_is_taken_over_where_it_left_off(
    service: RunService,
    follows: LogFollower,
    other: LogFollower,
    standin: SlackStandIn,
    gateway: GrowingLog,
    run: Run,
    clock: Clock,
) -> None:
    gateway.add("a", "b")
    follows.follow(run.name, user=ALICE)
    dead = the_loop(follows)
    gateway.add("c")
    assert other.take_over() == 0  # its holder renews: nothing to take over
    clock.now += timedelta(seconds=61)  # replica A stopped renewing (killed)
    assert other.take_over() == 1
    first, second = streamed(standin, run)
    assert standin.stream_state(C, str(first["ts"])) == "stopped"
    assert str(first["text"]).endswith("continued in the next message._")
    assert standin.stream_state(C, str(second["ts"])) == "streaming"
    assert "continued**" in str(second["text"]) and "c\n" in str(second["text"]) and "a\n" not in str(second["text"])
    gateway.add("d")
    assert not dead.step()  # A comes back: its lease is gone, it appends nothing
    assert "d\n" not in str(streamed(standin, run)[1]["text"])
    assert other.take_over() == 0


def test_ten_minutes_then_the_limit_line_and_a_new_message_before_slack_ends_one(
    service: RunService, follows: LogFollower, standin: SlackStandIn, gateway: GrowingLog, run: Run, clock: Clock
) -> None:
    gateway.add("a")
    follows.follow(run.name, user=ALICE)
    loop = the_loop(follows)
    clock.now += timedelta(minutes=4)  # Slack ends a stream five minutes after its start: go on in a new one
    gateway.add("b")
    assert loop.step()
    first, second = streamed(standin, run)
    assert standin.stream_state(C, str(first["ts"])) == "stopped" and "b\n" in str(second["text"])
    clock.now += timedelta(minutes=6)
    assert not loop.step()
    assert str(streamed(standin, run)[1]["text"]).endswith(
        ":hourglass: 10-minute limit reached; `/finetune logs sft-tiny-follow follow` again to keep following."
    )


def test_polyaxon_unreachable_is_said_once_and_the_follow_goes_on(
    service: RunService, follows: LogFollower, standin: SlackStandIn, gateway: GrowingLog, run: Run, clock: Clock
) -> None:
    follows.follow(run.name, user=ALICE)
    loop = the_loop(follows)
    gateway.down = True
    assert loop.step() and loop.step()
    gateway.down = False
    gateway.add("back")
    assert loop.step()
    text = str(streamed(standin, run)[0]["text"])
    assert text.count("Polyaxon unreachable, retrying…") == 1 and "Polyaxon answers again" in text
    assert "back\n" in text


def test_long_logs_go_out_in_chunks_slack_takes(
    service: RunService, follows: LogFollower, standin: SlackStandIn, gateway: GrowingLog, run: Run, clock: Clock
) -> None:
    follows.follow(run.name, user=ALICE)
    gateway.add(*[f"{i:05d} " + "x" * 990 for i in range(30)], "y" * 50_000)
    assert the_loop(follows).step()
    sizes = [len(str(c["markdown_text"])) for c in standin.calls("chat.appendStream")]
    assert len(sizes) >= 3 and max(sizes) <= 12_000
    text = str(streamed(standin, run)[0]["text"])
    assert all(f"{i:05d} " in text for i in range(30)) and "y" * 100 + "…" in text


def test_follow_refuses_what_it_cannot_follow(
    service: RunService, follows: LogFollower, standin: SlackStandIn, run: Run
) -> None:
    with service.sessions() as s:
        queued = create_run(s, "sft-tiny-queued", status="queued", channel=C)
    with pytest.raises(RunError, match="has not reached Polyaxon yet"):
        follows.follow(queued.name, user=ALICE)
    with pytest.raises(RunError, match="no run"):
        follows.follow("nosuchrun", user=ALICE)


def test_a_replica_that_shuts_down_hands_its_follow_over_at_once(
    service: RunService,
    follows: LogFollower,
    other: LogFollower,
    standin: SlackStandIn,
    gateway: GrowingLog,
    run: Run,
    clock: Clock,
) -> None:
    gateway.add("a")
    follows.follow(run.name, user=ALICE)
    follows.shutdown()  # a clean stop (a deploy): no need to wait for the lease to lapse
    assert other.take_over() == 1
    first, second = streamed(standin, run)
    assert standin.stream_state(C, str(first["ts"])) == "stopped"
    assert str(first["text"]).endswith("_…the follower stopped; continued in the next message._")
    assert standin.stream_state(C, str(second["ts"])) == "streaming"


def test_a_follow_taken_over_after_its_ten_minutes_only_closes_what_was_left_open(
    service: RunService,
    follows: LogFollower,
    other: LogFollower,
    standin: SlackStandIn,
    gateway: GrowingLog,
    run: Run,
    clock: Clock,
) -> None:
    follows.follow(run.name, user=ALICE)
    clock.now += timedelta(minutes=11)  # its replica died, and nobody came back until now
    assert other.take_over() == 1
    [message] = streamed(standin, run)
    assert standin.stream_state(C, str(message["ts"])) == "stopped"
    assert str(message["text"]).endswith(
        "10-minute limit reached; `/finetune logs sft-tiny-follow follow` again to keep following."
    )
    with service.sessions() as s:
        row = repos.get_follow(s, run_id=run.id)
    assert row is not None and row.state == "stopped"


def test_a_rate_limited_append_is_retried_and_goes_out_once(
    service: RunService, follows: LogFollower, standin: SlackStandIn, gateway: GrowingLog, run: Run, clock: Clock
) -> None:
    follows.follow(run.name, user=ALICE)
    standin.rate_limit("chat.appendStream", 1, retry_after=1)
    gateway.add("after the 429")
    assert the_loop(follows).step()
    assert str(streamed(standin, run)[0]["text"]).count("after the 429\n") == 1
