"""How requesters hear of their runs, through the front door: `notify=` refused or shown on the plan, and App Home's
"When my runs end or need me" select — stored, the tab published again, a forged value refused and nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from bot.home import NOTIFY_ACTION
from bot.home.compose import NOTIFY_BLOCK
from bot.local.slack import SlackSender, SlackStandIn, viewing
from storage import repos
from storage.models import AuditEntry, Run
from tests.fixtures.slack import BotServer, wait_for

ALICE = "U0ALICE01"


def _reply(sender: SlackSender, standin: SlackStandIn, text: str) -> str:
    before = len(standin.response_url_posts())
    assert sender.slash_command(text).status == 200
    posts = wait_for(lambda: (p := standin.response_url_posts()) and len(p) > before and p)
    return str(posts[-1]["payload"]["blocks"])


def _select(view: dict[str, Any]) -> dict[str, Any]:
    [block] = [b for b in view["blocks"] if b.get("block_id") == NOTIFY_BLOCK]
    return dict(block["accessory"])


def test_a_bad_notify_is_refused_with_the_valid_values_and_nothing_is_submitted(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    text = _reply(sender, slack_standin, "run recipe=quickstart notify=dms")
    assert "notify=thread" in text and "notify=both" in text and "did you mean notify=dm?" in text
    with bot_server.services.sessions() as s:
        assert s.exec(select(Run)).all() == []
        [entry] = s.exec(select(AuditEntry)).all()
    assert entry.outcome == "refused"
    assert slack_standin.messages("C0TRAIN01") == []


def test_the_plan_says_how_the_requester_hears_of_the_run(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    chosen = _reply(sender, slack_standin, "run recipe=quickstart notify=dm --dry-run")
    assert "a direct message (no mention in its thread) (`notify=dm`)" in chosen
    default = _reply(sender, slack_standin, "run recipe=quickstart --dry-run")
    assert "as your App Home default says" in default


def test_the_home_select_stores_the_default_and_publishes_the_tab_again(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    sender.home_opened(ALICE)
    home = wait_for(lambda: slack_standin.views.home(ALICE))
    assert _select(home)["initial_option"]["value"] == "thread"
    with pytest.raises(ValueError):  # Slack's client offers only the three
        slack_standin.views.choose(home["id"], NOTIFY_BLOCK, NOTIFY_ACTION, "email")
    slack_standin.views.choose(home["id"], NOTIFY_BLOCK, NOTIFY_ACTION, "dm")
    assert sender.view_action(home["id"], NOTIFY_BLOCK, NOTIFY_ACTION).status == 200
    wait_for(lambda: _select(slack_standin.views.home(ALICE) or home)["initial_option"]["value"] == "dm")
    with bot_server.services.sessions() as s:
        assert repos.get_notify_preference(s, user=ALICE) == "dm"
    assert len(bot_server.deliveries("action")) == 1  # recorded once in the delivery ledger


def test_a_forged_home_choice_is_refused_and_changes_nothing(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    with bot_server.services.sessions() as s:
        repos.set_notify_preference(s, user=ALICE, notify="both")
    sender.home_opened(ALICE)
    home = wait_for(lambda: slack_standin.views.home(ALICE))
    slack_standin.views.choose(home["id"], NOTIFY_BLOCK, NOTIFY_ACTION, "dm")
    with slack_standin.state.lock:
        payload = viewing.view_action_payload(slack_standin.state, home["id"], NOTIFY_BLOCK, NOTIFY_ACTION)
    payload["actions"][0]["selected_option"] = {"text": {"type": "plain_text", "text": "x"}, "value": "email"}
    assert sender.interactivity(payload).status == 200
    modal = wait_for(lambda: (top := slack_standin.views.top(ALICE)) and "Nothing was changed" in str(top) and top)
    assert "`email` is not one of the choices" in str(modal["blocks"])
    with bot_server.services.sessions() as s:
        assert repos.get_notify_preference(s, user=ALICE) == "both"
        refused = [e for e in s.exec(select(AuditEntry)).all() if e.outcome == "refused"]
    assert [e.command for e in refused] == ["home notify"]
