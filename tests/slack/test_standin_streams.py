"""The stand-in's message streaming (chat.startStream, appendStream, stopStream) to the unmodified WebClient."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL, TEAM_ID

C = DEFAULT_CHANNEL
ALICE = "U0ALICE01"


@pytest.fixture
def client(slack_standin: SlackStandIn) -> WebClient:
    """A plain WebClient (no retries) on the stand-in."""
    return WebClient(base_url=slack_standin.base_url, token=slack_standin.bot_token, retry_handlers=[])


def _error(call: Callable[[], object]) -> str:
    with pytest.raises(SlackApiError) as info:
        call()
    return str(info.value.response["error"])


def _start(client: WebClient, parent: str, text: str | None = "start\n") -> str:
    response = client.chat_startStream(
        channel=C, thread_ts=parent, markdown_text=text, recipient_team_id=TEAM_ID, recipient_user_id=ALICE
    )
    return str(response["ts"])


def test_a_stream_grows_one_reply_and_stops(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    ts = _start(client, parent)
    assert slack_standin.stream_state(C, ts) == "streaming"
    client.chat_appendStream(channel=C, ts=ts, markdown_text="one\n")
    client.chat_appendStream(channel=C, ts=ts, chunks=[{"type": "markdown_text", "text": "two\n"}])
    client.chat_stopStream(channel=C, ts=ts, markdown_text="done")
    [reply] = slack_standin.replies(C, parent)
    assert reply["ts"] == ts and reply["text"] == "start\none\ntwo\ndone"
    assert slack_standin.stream_state(C, ts) == "stopped"
    assert _error(lambda: client.chat_appendStream(channel=C, ts=ts, markdown_text="late")) == (
        "message_not_in_streaming_state"
    )
    assert _error(lambda: client.chat_stopStream(channel=C, ts=ts)) == "message_not_in_streaming_state"


def test_slack_sdks_chat_stream_helper_works_against_it(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    streamer = client.chat_stream(
        channel=C, thread_ts=parent, recipient_team_id=TEAM_ID, recipient_user_id=ALICE, buffer_size=8
    )
    streamer.append(markdown_text="abc")  # buffered
    streamer.append(markdown_text="defghij")  # flushed: startStream with chunks
    streamer.append(markdown_text="k")
    streamer.stop(markdown_text="!")
    [reply] = slack_standin.replies(C, parent)
    assert reply["text"] == "abcdefghijk!" and slack_standin.stream_state(C, reply["ts"]) == "stopped"


def test_start_refuses_what_slack_refuses(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    assert _error(lambda: client.chat_startStream(channel=C, thread_ts=parent, recipient_user_id=ALICE)) == (
        "missing_recipient_team_id"
    )
    assert _error(lambda: client.chat_startStream(channel=C, thread_ts=parent, recipient_team_id=TEAM_ID)) == (
        "missing_recipient_user_id"
    )
    assert _error(lambda: client.chat_startStream(channel="C0NOPE", thread_ts=parent)) == "channel_not_found"
    assert _error(lambda: _start(client, parent, "x" * 12_001)) == "msg_too_long"
    assert _error(
        lambda: client.chat_startStream(
            channel="C0GENERAL", thread_ts=parent, recipient_team_id=TEAM_ID, recipient_user_id=ALICE
        )
    ) == ("not_in_channel")
    # In the bot's direct messages with someone, no recipient is needed.
    dm = client.chat_postMessage(channel=ALICE, text="hi")
    assert client.chat_startStream(channel=dm["channel"], thread_ts=dm["ts"])["ts"]


def test_append_refuses_what_slack_refuses(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    ts = _start(client, parent)
    assert _error(lambda: client.chat_appendStream(channel=C, ts=ts, markdown_text="x" * 12_001)) == "msg_too_long"
    # 12,000 characters is the limit of one call, not of the message.
    client.chat_appendStream(channel=C, ts=ts, markdown_text="x" * 12_000)
    client.chat_appendStream(channel=C, ts=ts, markdown_text="y" * 12_000)
    assert _error(lambda: client.chat_appendStream(channel=C, ts="1.000001", markdown_text="x")) == (
        "message_not_found"
    )
    plain = client.chat_postMessage(channel=C, text="not a stream", thread_ts=parent)["ts"]
    assert _error(lambda: client.chat_appendStream(channel=C, ts=plain, markdown_text="x")) == (
        "message_not_in_streaming_state"
    )
    theirs = slack_standin.post_as_user(ALICE, C, "mine", thread_ts=parent)
    assert _error(lambda: client.chat_appendStream(channel=C, ts=theirs, markdown_text="x")) == (
        "message_not_owned_by_app"
    )
    assert _error(lambda: client.chat_appendStream(channel=C, ts=ts)) == "invalid_arguments"
    assert _error(lambda: client.chat_appendStream(channel=C, ts=ts, chunks=[{"type": "poem", "text": "x"}])) == (
        "invalid_chunks"
    )
    assert _error(lambda: client.chat_stopStream(channel=C, ts=ts, blocks=[{"type": "nope"}])) == "invalid_blocks"


def test_a_stream_ends_on_its_own_after_slacks_lifetime(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    ts = _start(client, parent)
    slack_standin.state.stream_lifetime_s = 0.0
    assert _error(lambda: client.chat_appendStream(channel=C, ts=ts, markdown_text="x")) == (
        "message_not_in_streaming_state"
    )
    assert slack_standin.stream_state(C, ts) == "stopped"
    assert slack_standin.message(C, ts)["text"] == "start\n"


def test_rate_limits_apply_to_appends(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    ts = _start(client, parent)
    slack_standin.rate_limit("chat.appendStream", 1, retry_after=2)
    with pytest.raises(SlackApiError) as info:
        client.chat_appendStream(channel=C, ts=ts, markdown_text="x")
    assert info.value.response.status_code == 429 and info.value.response.headers["Retry-After"] == "2"
    client.chat_appendStream(channel=C, ts=ts, markdown_text="x")
    assert slack_standin.message(C, ts)["text"] == "start\nx"
