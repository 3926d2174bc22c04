"""Channel ids and membership against the stand-in: conversations.members paged, a yes cached, errors unknown."""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.local.slack import SlackStandIn
from bot.local.slack.server import BOT_USER_ID, DEFAULT_CHANNEL
from bot.slack.channels import ChannelMembers, is_channel_id

ALICE = "U0ALICE01"


@pytest.mark.parametrize(
    ("value", "ok"),
    [("C0TRAIN01", True), ("G0PRIVATE", True), ("D0ALICE01", True), ("c0train01", False), ("#general", False),
     ("C0TRAIN01\n", False), ("", False), ({"id": "C0TRAIN01"}, False), (None, False), ("C" + "0" * 30, False)],
    ids=["channel", "group", "dm", "lower-case", "a-name", "newline", "empty", "object", "none", "too-long"],
)  # fmt: skip
def test_a_channel_id_has_slacks_shape(value: object, ok: bool) -> None:
    assert is_channel_id(value) is ok


def test_membership_is_read_through_every_page_and_a_yes_is_cached(slack_standin: SlackStandIn) -> None:
    crowd = [f"U{i:08d}" for i in range(2500)]  # three pages of 1000: alice sorts after every one of them
    slack_standin.add_channel("C0CROWD01", "crowd", members=[*crowd, ALICE, BOT_USER_ID])
    client = WebClient(token=slack_standin.bot_token, base_url=slack_standin.base_url)
    clock = [0.0]
    members = ChannelMembers(ttl_s=60.0, monotonic=lambda: clock[0])
    assert members.is_member(client, channel="C0CROWD01", user=ALICE) is True
    assert len(slack_standin.calls("conversations.members")) == 3
    assert members.is_member(client, channel="C0CROWD01", user=ALICE) is True  # cached
    assert len(slack_standin.calls("conversations.members")) == 3
    clock[0] = 61.0
    assert members.is_member(client, channel="C0CROWD01", user=ALICE) is True  # asked again once it is old
    assert len(slack_standin.calls("conversations.members")) == 6
    assert members.is_member(client, channel="C0GENERAL", user=BOT_USER_ID) is False
    assert members.is_member(client, channel="C0GENERAL", user=BOT_USER_ID) is False  # a no is asked again
    assert len(slack_standin.calls("conversations.members")) == 8
    assert members.is_member(client, channel=DEFAULT_CHANNEL, user=ALICE) is True


def test_slack_not_answering_is_unknown_and_the_stand_in_answers_as_slack(slack_standin: SlackStandIn) -> None:
    slack_standin.add_channel("C0HIDDEN1", "hidden", members=[ALICE], is_private=True)  # the bot is not in it
    client = WebClient(token=slack_standin.bot_token, base_url=slack_standin.base_url)
    members = ChannelMembers()
    assert members.is_member(client, channel="C0HIDDEN1", user=ALICE) is None
    assert members.is_member(client, channel="C0NOSUCH1", user=ALICE) is None
    for method, args, error in [
        (client.conversations_members, {"channel": "C0HIDDEN1"}, "channel_not_found"),
        (client.conversations_info, {"channel": "C0HIDDEN1"}, "channel_not_found"),
        (client.conversations_members, {"channel": DEFAULT_CHANNEL, "cursor": "bogus"}, "invalid_cursor"),
        (client.conversations_members, {"channel": DEFAULT_CHANNEL, "limit": "many"}, "invalid_limit"),
    ]:
        with pytest.raises(SlackApiError) as refused:
            method(**args)
        assert refused.value.response["error"] == error
