"""How a requester hears of their run: the thread's mention with each setting, and the direct message — sent once per
run and reason, a Slack error recorded as a background item (never raised), an unreachable person told in the thread.

The watcher runs on the fake gateway of tests/bot/watch/test_watcher.py against the Slack stand-in, whose direct
messages with a person are the channel `D…` (chat.postMessage to a user id posts there, as Slack does).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from bot.failures import FailureService
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.notify import DM_KIND, dm_text, metrics_summary
from bot.watch import Watcher
from storage import repos
from storage.db import SessionFactory
from storage.models import Run
from tests.bot.watch.test_watcher import Clock, FakeGateway, make_watcher
from tests.fixtures.runs import create_run

ALICE = "U0ALICE01"
ALICE_DM = "D0ALICE01"


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


def _ready(sessions: SessionFactory, standin: SlackStandIn, **policy: Any) -> tuple[Watcher, FakeGateway, Clock, Run]:
    """A watcher with one running run (its card posted) whose policy is `policy`."""
    clock = Clock()
    gateway = FakeGateway(clock)
    watcher = make_watcher(sessions, standin, gateway, clock, 1)
    with sessions() as s:
        [run] = repos.list_recent_runs(s, limit=1)
        run = repos.update_run(s, run, policy=policy or None)
    return watcher, gateway, clock, run


def _dms(standin: SlackStandIn, channel: str = ALICE_DM) -> list[dict[str, Any]]:
    try:
        return standin.messages(channel)
    except Exception:  # the stand-in opens a direct message channel on the first post to that person
        return []


@pytest.mark.parametrize(
    ("policy", "default", "mentioned"),
    [
        ({}, None, True),
        ({"notify_requester": "thread"}, "dm", True),
        ({"notify_requester": "both"}, None, True),
        ({"notify_requester": "dm"}, None, False),
        ({}, "dm", False),  # the person's App Home default
        ({"notify_requester": "shout"}, "both", True),  # a stored value not one of the three counts as none
    ],
    ids=["default-thread", "run-thread-over-default-dm", "both", "dm", "home-default-dm", "bad-stored-value"],
)
def test_the_thread_mentions_the_requester_unless_they_chose_a_direct_message_only(
    sessions: SessionFactory, standin: SlackStandIn, policy: dict[str, Any], default: str | None, mentioned: bool
) -> None:
    watcher, _, _, run = _ready(sessions, standin, **policy)
    if default is not None:
        with sessions() as s:
            repos.set_notify_preference(s, user=ALICE, notify=default)
    failures: FailureService = watcher.failures
    stopped = failures.stopped_text(run)
    if mentioned:
        assert failures.mention(run) == f"<@{ALICE}>" and stopped.endswith(f"\n<@{ALICE}>")
    else:
        assert failures.mention(run) == "" and failures.with_mention("done", run) == "done"
        assert "<@" not in stopped and not stopped.endswith("\n")


def test_a_run_that_succeeds_with_notify_dm_sends_one_direct_message_and_mentions_nobody(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    watcher, gateway, clock, run = _ready(sessions, standin, notify_requester="dm")
    watcher.tick()
    clock.now += timedelta(seconds=5)
    gateway.put("uuid0000", status="succeeded")
    gateway.metrics["uuid0000"] = ({"eval_loss": 1.2345, "loss": 0.5}, 40)
    assert watcher.tick().transitions == 1
    [dm] = _dms(standin)
    assert f"Your run `{run.name}` (recipe `sft-tiny`) succeeded: eval_loss 1.234, loss 0.5" in dm["text"]
    assert "|Open its thread>" in dm["text"]
    success = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "*succeeded*" in m["text"]]
    assert len(success) == 1 and "<@" not in success[0]["text"] and not success[0]["text"].endswith("\n")
    # Once per run and reason: a second call (a retried pass, the unposted-transition recovery) sends nothing.
    with sessions() as s:
        fresh = repos.get_run(s, run_id=run.id or 0)
    assert fresh is not None and watcher.failures.notifier.tell_end(fresh, "succeeded") is False
    watcher.failures.notifier.resend_after = timedelta(0)
    assert watcher.failures.notifier.retry_unsent() == 0
    clock.now += timedelta(seconds=5)
    watcher.tick()
    assert len(_dms(standin)) == 1


def test_a_thread_only_requester_gets_no_direct_message(sessions: SessionFactory, standin: SlackStandIn) -> None:
    watcher, gateway, clock, run = _ready(sessions, standin)
    watcher.tick()
    clock.now += timedelta(seconds=5)
    gateway.put("uuid0000", status="stopped")
    watcher.tick()
    assert _dms(standin) == []
    stopped = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "*stopped*" in m["text"]]
    assert stopped[0]["text"].endswith(f"<@{ALICE}>")


def test_both_mentions_in_the_thread_and_sends_the_stuck_notice_by_direct_message(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    watcher, _, clock, run = _ready(sessions, standin, notify_requester="both")
    watcher.tick()
    clock.now += timedelta(minutes=20)
    assert watcher.tick().stuck_flagged == 1
    stuck = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "Possibly stuck" in m["text"]]
    assert stuck[0]["text"].endswith(f"<@{ALICE}>")
    [dm] = _dms(standin)
    assert "may be stuck: no new metric and no change in Polyaxon for 20 min" in dm["text"]


def test_a_rate_limited_direct_message_is_recorded_not_raised_and_sent_by_a_later_pass(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    watcher, _, clock, run = _ready(sessions, standin, notify_requester="dm")
    notifier = watcher.failures.notifier
    standin.rate_limit("chat.postMessage", 1, retry_after=30)
    assert notifier.tell(run, "stuck", "quiet") is False  # never raised: the card and thread go on
    [failure] = watcher.runs.deps.items.failures(kind=DM_KIND)
    assert "ratelimited" in failure.last_error and failure.parked_at is None
    assert _dms(standin) == []
    assert notifier.tell(run, "stuck", "quiet") is False  # claimed already: the retry pass sends it, not this call
    notifier.resend_after = timedelta(0)
    clock.now += timedelta(seconds=11)  # past the item's first backoff
    assert notifier.retry_unsent() == 1
    assert notifier.retry_unsent() == 0
    assert len(_dms(standin)) == 1 and watcher.runs.deps.items.failures(kind=DM_KIND) == []


def test_a_person_slack_cannot_message_is_told_in_the_thread_at_once(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    standin.add_user("U0ROBOT01", "robot", is_bot=True)
    watcher, _, _, run = _ready(sessions, standin, notify_requester="dm")
    with sessions() as s:
        robot_run = create_run(
            s, "robot-run", requester="U0ROBOT01", status="succeeded", policy={"notify_requester": "dm"}
        )
    with sessions() as s:  # the same thread, for the fallback post
        robot_run = repos.update_run(s, robot_run, card_ts=run.card_ts)
    assert watcher.failures.notifier.tell(robot_run, "succeeded", "loss 1") is False
    [failure] = watcher.runs.deps.items.failures(kind=DM_KIND)
    assert "cannot_dm_bot" in failure.last_error and failure.parked_at is not None  # parked at once: told
    told = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "could not send you" in m["text"]]
    assert len(told) == 1 and told[0]["text"].startswith("<@U0ROBOT01>") and "loss 1" in told[0]["text"]
    watcher.failures.notifier.resend_after = timedelta(0)
    assert watcher.failures.notifier.retry_unsent() == 0  # told in the thread instead: not tried again


def test_the_direct_message_text() -> None:
    assert metrics_summary({"loss": 0.5, "eval_loss": 1.23456, "note": "x", "a": 1, "b": 2}, ["eval_loss"]) == (
        "eval_loss 1.235, a 1, b 2, loss 0.5"
    )
    assert metrics_summary({f"m{i}": i for i in range(6)}).endswith(", …")
    text = dm_text(reason="failed", run_name="a<b", recipe="sft-tiny", detail="Out of memory", link=None)
    assert text == ":x: Your run `a&lt;b` (recipe `sft-tiny`) failed: Out of memory"
    assert dm_text(reason="stopped", run_name="r", recipe="x", detail="", link="https://l").endswith(
        "was stopped.\n<https://l|Open its thread>"
    )


def test_an_end_recorded_by_a_process_that_died_is_told_by_direct_message_once_on_recovery(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    watcher, gateway, clock, run = _ready(sessions, standin, notify_requester="dm")
    watcher.tick()
    # A process recorded the success and died before telling it (and before its direct message).
    gateway.put("uuid0000", status="succeeded")
    with sessions() as s:
        fresh = repos.get_run(s, run_id=run.id or 0)
        assert fresh is not None
        repos.update_run(s, fresh, last_metrics={"loss": 0.25})
        repos.record_status(s, fresh, status="succeeded")
    watcher.recover_after = timedelta(0)
    clock.now += timedelta(seconds=5)
    assert watcher.tick().recovered_posts == 1
    [dm] = _dms(standin)
    assert f"Your run `{run.name}` (recipe `sft-tiny`) succeeded: loss 0.25" in dm["text"]
    clock.now += timedelta(seconds=5)
    watcher.tick()
    assert len(_dms(standin)) == 1
