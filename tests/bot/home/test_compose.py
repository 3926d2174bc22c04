"""The Home tab's content, without Slack: what each list shows, buttons unique, within a view's limits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.grammar import NOTIFY_CHOICES, Notify
from bot.home import HomeData, compose_home
from bot.home.compose import NOTIFY_ACTION, NOTIFY_BLOCK, HomeDigest, HomeRegistration, HomeRequest, HomeRun
from bot.local.slack.state import ApiError
from bot.local.slack.views import check_view
from bot.notify import NOTIFY_LABELS

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _text(view: dict[str, object]) -> str:
    return str(view["blocks"])


def test_an_empty_home_says_so_and_offers_a_new_run() -> None:
    view = compose_home(HomeData(user="U1", now=NOW))
    check_view(view, kind="home")
    text = _text(view)
    assert "New run" in text and "No active runs" in text and "Nothing to approve." in text
    assert "No model versions registered" in text and "None of your channels has a digest" in text


def test_runs_requests_registrations_and_digests_are_listed() -> None:
    data = HomeData(
        user="U1",
        runs=[
            HomeRun(name=f"sft-tiny-{i:010d}", recipe="sft-tiny", status="running", channel="C1", step=5, max_steps=40)
            for i in range(20)
        ],
        requests=[
            HomeRequest(
                action="register",
                subject="tiny-chat",
                run_name="r1",
                channel="C1",
                requester="U0BOB0002",
                approvals=0,
                quorum=1,
                mine=False,
                link="https://x/archives/C1/p1",
            ),
            HomeRequest(
                action="promote",
                subject="tiny-chat:v1 → staging",
                run_name="r1",
                channel="C1",
                requester="U1",
                approvals=1,
                quorum=2,
                mine=True,
            ),
        ],
        registrations=[HomeRegistration(model="tiny-chat", version="v1", run_name="r1", registered_at=NOW)],
        digests=[HomeDigest(channel="C1", schedule="daily at 09:00 (UTC)")],
        now=NOW,
    )
    view = compose_home(data)
    check_view(view, kind="home")
    text = _text(view)
    assert "Your active runs (20)" in text and "…and 5 more" in text and "step 5/40" in text
    assert "Waiting for you (1)" in text and "Register `tiny-chat`" in text and "asked by <@U0BOB0002>" in text
    assert "Your requests, waiting for approvers" in text and "1/2 approvals" in text
    assert "`tiny-chat:v1` from `r1`, 2026-12-05 09:00 UTC" in text and "daily at 09:00 (UTC)" in text
    action_ids = [e["action_id"] for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert len(action_ids) == len(set(action_ids))  # unique within the view, as Slack requires


@pytest.mark.parametrize("current", NOTIFY_CHOICES)
def test_the_notify_choice_shows_the_persons_default_and_all_three_ways(current: Notify) -> None:
    view = compose_home(HomeData(user="U1", now=NOW, notify=current))
    check_view(view, kind="home")
    [block] = [b for b in view["blocks"] if b.get("block_id") == NOTIFY_BLOCK]
    select = block["accessory"]
    assert select["type"] == "static_select" and select["action_id"] == NOTIFY_ACTION
    assert [o["value"] for o in select["options"]] == ["thread", "dm", "both"]
    assert select["initial_option"]["value"] == current
    assert f"When my runs end or need me*: {NOTIFY_LABELS[current].lower()}" in block["text"]["text"]
    # The stand-in checks a select outside an input block as Slack does: its initial option must be offered.
    select["initial_option"] = {"text": {"type": "plain_text", "text": "Shout"}, "value": "shout"}
    with pytest.raises(ApiError) as refused:
        check_view(view, kind="home")
    assert "is not one of the options" in str(refused.value.extra)
