"""One bad row never stops everyone's cards (issue 33 A), on the real local Polyaxon and the Slack stand-in.

Beside a healthy quickstart run, poison items of the background passes (a pending card whose channel Slack does
not know, a scheduled digest for a channel that is gone) are recorded with their error, retried with backoff,
parked at the limit and told to the requester; a run typed in a direct message is refused before anything is
recorded. Before the fix, the first poison row raised `channel_not_found` out of every tick and no card moved.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.background import BackgroundItems, RetryPolicy
from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import BackgroundItemFailure
from tests.e2e.conftest import ALICE, CHANNEL, reply_text, start_live_bot
from tests.fixtures.slack import wait_for

pytestmark = pytest.mark.polyaxon

DM = "D0ALICE01"  # Alice's direct messages with the bot (where she is told of what was given up)
LIMIT = 3


def _parked(items: BackgroundItems, kind: str) -> BackgroundItemFailure | None:
    return next((f for f in items.failures(kind=kind) if f.parked_at is not None), None)


def test_poison_items_are_parked_and_told_while_a_healthy_run_reaches_succeeded(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path: Path
) -> None:
    with start_live_bot(polyaxon_stack, tmp_path) as bot:
        services = bot.runtime.services
        assert services.runs is not None and services.digests is not None
        items = services.runs.deps.items
        assert services.digests.items is items  # one isolation of background items per process
        items.policy = RetryPolicy(first_s=0.5, max_s=2.0, limit=LIMIT)

        # A run typed in a direct message is refused up front, saying where to run it; nothing is recorded.
        before = len(bot.standin.response_url_posts(DM))
        assert bot.sender.slash_command("run recipe=quickstart", user_id=ALICE, channel_id=DM).status == 200
        [refusal] = wait_for(lambda: bot.standin.response_url_posts(DM)[before:] or None, timeout=30)
        text = reply_text(refusal["payload"])
        assert "this is a direct message" in text and "`/invite @finetune-bot`" in text
        with services.sessions() as s:
            assert repos.list_recent_runs(s, limit=10) == []

        # Poison 1: a run recorded for a conversation Slack does not know, waiting for its card (as a DM run was
        # left before the fix). Poison 2: a scheduled digest for a channel that is gone.
        with services.sessions() as s:
            poison = repos.create_run(
                s,
                name="quickstart-poison0001",
                recipe_name="quickstart",
                recipe_hash="sha256:poison",
                requester=ALICE,
                channel="D0NOWHERE",
                status="pending_submit",
                pending_operation={"operation": {"version": 1.1, "kind": "operation"}, "tags": []},
            )
            repos.upsert_digest_schedule(s, channel="C0GONE001", cron="0 9 * * *", timezone="UTC", created_by=ALICE)
        assert services.digests.post_scheduled("C0GONE001") is None  # failed, recorded: never raised

        # The healthy run: its card still reaches succeeded while the poison items fail beside it.
        reply = bot.command("run recipe=quickstart")
        assert "Planned quickstart" in reply_text(reply)
        healthy = bot.newest_run()
        assert healthy.name != poison.name
        done = bot.wait_status(healthy.name, {"succeeded"}, timeout=240)
        bot.wait_card(done, "succeeded")

        # Each poison item: recorded with its error, retried with backoff, parked at the limit, told once.
        card = wait_for(lambda: _parked(items, "pending_submit"), timeout=60)
        assert card.run_id == poison.id and card.attempts == LIMIT and "channel_not_found" in card.last_error
        assert card.last_failed_at - card.first_failed_at >= RetryPolicy(first_s=0.5, limit=LIMIT).backoff(1)
        assert card.told_at is not None
        assert bot.run_named(poison.name).status == "submit_failed"
        digest = wait_for(lambda: _parked(items, "digest"), timeout=60)
        assert digest.key == "C0GONE001" and digest.attempts == LIMIT and "channel_not_found" in digest.last_error
        told = [str(m.get("text")) for m in bot.standin.messages(DM)]
        assert sum("gave up submitting it for `quickstart-poison0001`" in t for t in told) == 1
        assert sum("The digest of <#C0GONE001> could not be posted" in t for t in told) == 1
        # Nothing about the poison reached the healthy channel; its card is whole.
        assert not any("poison" in str(m.get("text")) for m in bot.standin.messages(CHANNEL))

        # Parked items stay parked across ticks (no more attempts) and show in /metrics.
        attempts = {f.kind: f.attempts for f in items.failures()}
        assert bot.runtime.watcher is not None
        bot.runtime.watcher.tick()
        assert {f.kind: f.attempts for f in items.failures()} == attempts
        metrics = httpx.get(f"{bot.http.url}/metrics", timeout=10).text
        assert 'finetune_bot_background_items{kind="pending_submit",state="parked"} 1.0' in metrics
        assert 'finetune_bot_background_items{kind="digest",state="parked"} 1.0' in metrics
