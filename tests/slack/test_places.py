"""A command that posts is refused up front where the bot cannot post (issue 33 A), through the real front door."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from bot.local.slack import SlackSender, SlackStandIn
from storage.models import AuditEntry, Run
from tests.fixtures.slack import BotServer, wait_for

ALICE = "U0ALICE01"
DM = "D0ALICE01"  # Alice's direct messages: Slack sends channel_name=directmessage


def _reply(sender: SlackSender, standin: SlackStandIn, text: str, channel: str) -> str:
    before = len(standin.response_url_posts())
    assert sender.slash_command(text, user_id=ALICE, channel_id=channel).status == 200
    posts = wait_for(lambda: (p := standin.response_url_posts()) and len(p) > before and p)
    payload: dict[str, Any] = posts[-1]["payload"]
    assert payload["response_type"] == "ephemeral"
    return str(payload["text"]) + str(payload["blocks"])


@pytest.mark.parametrize(
    "text",
    [
        "run recipe=quickstart",
        "sweep recipe=sft-tiny lr=1e-3,2e-3",
        "preflight recipe=sft-tiny-ddp",
        "register quickstart-abc model=m",
        "resume quickstart-abc",
        "promote m:1 stage=staging",
        "digest daily 09:00",
    ],
    ids=["run", "sweep", "preflight", "register", "resume", "promote", "digest"],
)
def test_a_posting_command_in_a_direct_message_is_refused_saying_where_to_run_it(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, text: str
) -> None:
    reply = _reply(sender, slack_standin, text, DM)
    sub = text.split()[0]
    assert f"`/finetune {sub}` posts in the channel it is typed in, but this is a direct message" in reply
    assert "Run it in a channel the bot is in, or invite it first: `/invite @finetune-bot`" in reply
    with bot_server.services.sessions() as s:
        assert s.exec(select(Run)).all() == []
        [audit] = s.exec(select(AuditEntry)).all()
    assert (audit.command, audit.outcome, audit.channel) == (f"/finetune {sub}", "refused", DM)


def test_a_channel_the_bot_is_not_in_is_refused_and_asked_once_a_minute(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    # #general exists but the bot was never invited: chat.postMessage would answer not_in_channel.
    for _ in range(2):
        reply = _reply(sender, slack_standin, "run recipe=quickstart", "C0GENERAL")
        assert "but the bot is not a member of this channel" in reply
    assert len(slack_standin.calls("conversations.info")) == 1
    # A private channel it cannot see: conversations.info answers channel_not_found.
    reply = _reply(sender, slack_standin, "run recipe=quickstart", "C0SECRET1")
    assert "the bot cannot see this conversation (Slack says `channel_not_found`)" in reply
    with bot_server.services.sessions() as s:
        assert s.exec(select(Run)).all() == []


@pytest.mark.parametrize(
    "text", ["help", "recipes", "presets", "run recipe=quickstart --dry-run"], ids=["help", "recipes", "presets", "dry"]
)
def test_read_only_commands_keep_working_in_a_direct_message(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, text: str
) -> None:
    reply = _reply(sender, slack_standin, text, DM)
    assert "posts in the channel it is typed in" not in reply and "Something went wrong" not in reply
    assert slack_standin.calls("conversations.info") == []
