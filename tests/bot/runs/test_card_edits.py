"""Card edits at Slack's pace: only changed content is sent, the newest state wins, a 429 never blocks the caller.

The real `slack_sdk` WebClient (with the bot's retry policy) talks to the Slack stand-in, whose rate limits answer
429 with Retry-After as Slack does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.catalog import Catalog
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.metrics import BotMetrics
from bot.runs import RunService
from bot.runs.card_edits import CardEdits, content_digest
from bot.settings import FinetuneSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from storage import repos
from storage.db import SessionFactory
from storage.models import Run

REPO = Path(__file__).resolve().parents[3]


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


def service_and_run(sessions: SessionFactory, standin: SlackStandIn, ticks: Ticks) -> tuple[RunService, Run]:
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        finetune=FinetuneSettings(catalog_dir=REPO / "manifests"),
    )
    service = RunService(
        settings=settings,
        sessions=sessions,
        catalog=Catalog.load(REPO / "manifests"),
        gateway=None,  # type: ignore[arg-type]
        client=build_web_client(settings, BotMetrics()),
        clock=lambda: datetime(2026, 12, 4, 12, 0, tzinfo=UTC),
    )
    service.thread.edits = CardEdits(monotonic=ticks)
    with sessions() as s:
        run = repos.create_run(
            s,
            name="run-1",
            recipe_name="sft-tiny",
            recipe_hash="h",
            component="trl-sft",
            params={},
            presets=[],
            pins={},
            requester="U0ALICE01",
            channel=DEFAULT_CHANNEL,
            status="running",
        )
    service.thread.post_card(run)
    return service, run


def set_loss(sessions: SessionFactory, run: Run, loss: float) -> Run:
    with sessions() as s:
        fresh = repos.get_run(s, run_id=run.id or 0)
        assert fresh is not None
        return repos.update_run(s, fresh, last_metrics={"loss": loss})


def shown_loss(standin: SlackStandIn, run: Run) -> str:
    return str(standin.message(DEFAULT_CHANNEL, run.card_ts or "")["blocks"])


def test_edits_within_the_interval_wait_and_the_newest_state_is_sent_once(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    ticks = Ticks()
    service, run = service_and_run(sessions, standin, ticks)
    thread = service.thread
    edits_before = len(standin.calls("chat.update"))
    # Three metric updates in the second after the card was posted: none is sent now, each is pending.
    for loss in (2.5, 2.25, 2.125):
        run = set_loss(sessions, run, loss)
        assert thread.update_card(run) is False
    assert len(standin.calls("chat.update")) == edits_before and thread.edits.pending() == 1
    assert thread.flush_cards() == 0  # still within the interval
    ticks.now += 3.0
    assert thread.flush_cards() == 1  # one edit, with the newest state
    assert len(standin.calls("chat.update")) == edits_before + 1
    assert "2.125" in shown_loss(standin, run) and thread.edits.pending() == 0
    # Nothing changed since: no call at all, even when one is asked for (a transition forces past the interval).
    ticks.now += 3.0
    assert thread.update_card(run, force=True) is False
    assert len(standin.calls("chat.update")) == edits_before + 1


def test_a_429_leaves_the_card_pending_without_waiting_and_the_channel_waits_as_told(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    ticks = Ticks()
    service, run = service_and_run(sessions, standin, ticks)
    thread = service.thread
    ticks.now += 3.0
    standin.rate_limit("chat.update", count=1, retry_after=30)
    run = set_loss(sessions, run, 1.5)
    started = time.monotonic()
    assert thread.update_card(run, force=True) is False
    # The bot's client would wait out Retry-After (30 s) and retry; a card edit must not block its caller.
    assert time.monotonic() - started < 10
    assert thread.edits.pending() == 1
    ticks.now += 10.0
    run = set_loss(sessions, run, 1.25)
    assert thread.update_card(run, force=True) is False  # the channel still waits: even a forced edit stays pending
    assert thread.flush_cards() == 0
    ticks.now += 21.0
    assert thread.flush_cards() == 1
    assert "1.25" in shown_loss(standin, run) and thread.edits.pending() == 0


def test_the_digest_tells_equal_content_from_changed_content() -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "loss `1.5`"}}]
    assert content_digest("run-1", blocks) == content_digest("run-1", [dict(b) for b in blocks])
    assert content_digest("run-1", blocks) != content_digest("run-1", [{**blocks[0], "text": {"text": "loss `1.4`"}}])
    edits = CardEdits(monotonic=Ticks())
    for key in range(6000):  # the memory of sent content is bounded
        edits.sent(key, "d")
    assert len(edits._sent) == 5000 and 0 not in edits._sent and 5999 in edits._sent
