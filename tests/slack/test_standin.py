"""The stand-in speaks Slack's Web API to the unmodified slack_sdk.WebClient."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook import WebhookClient

from bot.local.slack import SlackStandIn
from bot.local.slack.server import BOT_USER_ID, DEFAULT_CHANNEL
from bot.metrics import BotMetrics
from bot.slack.client import build_web_client
from tests.fixtures.slack import slack_settings_for

C = DEFAULT_CHANNEL


@pytest.fixture
def client(slack_standin: SlackStandIn) -> WebClient:
    """A plain WebClient (no retries) on the stand-in."""
    return WebClient(base_url=slack_standin.base_url, token=slack_standin.bot_token, retry_handlers=[])


def _error(call: object) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        call()  # type: ignore[operator]
    return info.value


def test_threads_count_replies_and_ts_look_real(client: WebClient, slack_standin: SlackStandIn) -> None:
    parent = client.chat_postMessage(channel=C, text="card")["ts"]
    first = client.chat_postMessage(channel=C, text="one", thread_ts=parent)
    slack_standin.post_as_user("U0ALICE01", C, "two", thread_ts=parent)
    assert first["message"]["thread_ts"] == parent
    whole = client.conversations_replies(channel=C, ts=parent)["messages"]
    assert [m["text"] for m in whole] == ["card", "one", "two"]
    assert whole[0]["reply_count"] == 2 and set(whole[0]["reply_users"]) == {BOT_USER_ID, "U0ALICE01"}
    assert whole[0]["latest_reply"] == whole[2]["ts"]
    assert [m["text"] for m in client.conversations_history(channel=C)["messages"]] == ["card"]
    secs, micros = parent.split(".")
    assert len(micros) == 6 and abs(int(secs) - time.time()) < 60
    assert [m["text"] for m in slack_standin.replies(C, parent)] == ["one", "two"]


def test_update_ephemeral_permalink(client: WebClient, slack_standin: SlackStandIn) -> None:
    ts = client.chat_postMessage(channel=C, text="queued")["ts"]
    assert client.chat_update(channel=C, ts=ts, text="running")["text"] == "running"
    assert slack_standin.message(C, ts)["text"] == "running"
    user_ts = slack_standin.post_as_user("U0BOB0001", C, "mine")
    assert (
        _error(lambda: client.chat_update(channel=C, ts=user_ts, text="x")).response["error"] == "cant_update_message"
    )
    assert (
        _error(lambda: client.chat_update(channel=C, ts="1.000001", text="x")).response["error"] == "message_not_found"
    )
    assert client.chat_postEphemeral(channel=C, user="U0BOB0001", text="only you")["message_ts"]
    assert slack_standin.ephemerals(C, "U0BOB0001")[0]["text"] == "only you"
    link = client.chat_getPermalink(channel=C, message_ts=ts)["permalink"]
    assert link.endswith(f"/archives/{C}/p{ts.replace('.', '')}")
    assert _error(lambda: client.chat_postMessage(channel="C0GENERAL", text="x")).response["error"] == "not_in_channel"
    assert _error(lambda: client.chat_postMessage(channel="C0NOPE", text="x")).response["error"] == "channel_not_found"


def test_reactions(client: WebClient, slack_standin: SlackStandIn) -> None:
    ts = client.chat_postMessage(channel=C, text="approve me")["ts"]
    client.reactions_add(channel=C, timestamp=ts, name="eyes")
    slack_standin.react_as_user("U0BOB0001", C, ts, "white_check_mark")
    assert _error(lambda: client.reactions_add(channel=C, timestamp=ts, name="eyes")).response["error"] == (
        "already_reacted"
    )
    got = client.reactions_get(channel=C, timestamp=ts)["message"]["reactions"]
    assert {r["name"]: r["users"] for r in got} == {"eyes": [BOT_USER_ID], "white_check_mark": ["U0BOB0001"]}
    client.reactions_remove(channel=C, timestamp=ts, name="eyes")
    assert _error(lambda: client.reactions_remove(channel=C, timestamp=ts, name="eyes")).response["error"] == (
        "no_reaction"
    )
    assert slack_standin.reactions(C, ts) == {"white_check_mark": ["U0BOB0001"]}


def test_users_groups_channels_auth(client: WebClient, slack_standin: SlackStandIn) -> None:
    assert client.auth_test()["user_id"] == BOT_USER_ID
    assert client.users_info(user="U0ALICE01")["user"]["name"] == "alice"
    assert _error(lambda: client.users_info(user="U0NOBODY")).response["error"] == "user_not_found"
    slack_standin.add_usergroup("S0OTHERS", "others", users=["U0ALICE01"])
    assert client.usergroups_users_list(usergroup="S0APPROVE")["users"] == ["U0BOB0001", "U0CAROL01"]
    assert client.usergroups_users_list(usergroup="S0OTHERS")["users"] == ["U0ALICE01"]
    assert _error(lambda: client.usergroups_users_list(usergroup="S0NONE")).response["error"] == "no_such_subteam"
    info = client.conversations_info(channel=C)["channel"]
    assert info["name"] == "ml-training" and info["is_member"] is True


def test_files_upload_v2_flow(client: WebClient, slack_standin: SlackStandIn) -> None:
    card = client.chat_postMessage(channel=C, text="card")["ts"]
    done = client.files_upload_v2(
        channel=C, thread_ts=card, content=b"\x89PNG plot", filename="loss.png", title="Loss", initial_comment="compare"
    )
    assert done["files"][0]["title"] == "Loss"
    [stored] = slack_standin.files()
    assert stored["content"] == b"\x89PNG plot" and stored["thread_ts"] == card and stored["channel"] == C
    [reply] = slack_standin.replies(C, card)
    assert reply["text"] == "compare" and reply["files"][0]["name"] == "loss.png"
    assert [c["filename"] for c in slack_standin.calls("files.getUploadURLExternal")] == ["loss.png"]


def _section(chars: int) -> dict[str, object]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * chars}}


@pytest.mark.parametrize(
    ("text", "blocks", "error"),
    [
        ("x" * 40_000, None, None),
        ("x" * 40_001, None, "msg_too_long"),
        ("t", [{"type": "divider"}] * 50, None),
        ("t", [{"type": "divider"}] * 51, "invalid_blocks"),
        ("t", [_section(3_000)], None),
        ("t", [_section(3_001)], "invalid_blocks"),
        ("t", [{"type": "nonsense"}], "invalid_blocks"),
        ("", None, "no_text"),
    ],
    ids=["40k-ok", "40k+1", "50-blocks-ok", "51-blocks", "3000-ok", "3001", "unknown-type", "empty"],
)
def test_message_limits(
    client: WebClient, text: str, blocks: list[dict[str, object]] | None, error: str | None
) -> None:
    call = lambda: client.chat_postMessage(channel=C, text=text, blocks=blocks)  # noqa: E731
    if error is None:
        assert call()["ok"] is True
    else:
        err = _error(call)
        assert err.response.status_code == 200 and err.response["error"] == error


def test_tokens_are_checked(slack_standin: SlackStandIn) -> None:
    bad = WebClient(base_url=slack_standin.base_url, token="xoxb-not-the-token", retry_handlers=[])
    assert _error(bad.auth_test).response["error"] == "invalid_auth"
    app_token = WebClient(base_url=slack_standin.base_url, token=slack_standin.app_token, retry_handlers=[])
    assert _error(lambda: app_token.chat_postMessage(channel=C, text="x")).response["error"] == (
        "not_allowed_token_type"
    )
    assert app_token.apps_connections_open(app_token=slack_standin.app_token)["url"].startswith("ws://127.0.0.1:")


def test_429_has_retry_after_and_the_bot_client_rides_it_out(client: WebClient, slack_standin: SlackStandIn) -> None:
    slack_standin.rate_limit("chat.postMessage", 1, retry_after=7)
    err = _error(lambda: client.chat_postMessage(channel=C, text="x"))
    assert err.response.status_code == 429 and err.response.headers["Retry-After"] == "7"
    assert err.response["error"] == "ratelimited"

    metrics = BotMetrics()
    bot_client = build_web_client(slack_settings_for(slack_standin, "sqlite://"), metrics)
    slack_standin.rate_limit("chat.postMessage", 4, retry_after=1)
    started = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda i: bot_client.chat_postMessage(channel=C, text=f"m{i}"), range(3)))
    assert time.monotonic() - started >= 1.0  # Retry-After was honoured, not hammered
    assert sorted(m["text"] for m in slack_standin.messages(C)) == ["m0", "m1", "m2"]  # nothing lost, no dupes
    value = metrics.registry.get_sample_value(
        "finetune_bot_slack_api_errors_total", {"method": "chat.postMessage", "error": "ratelimited"}
    )
    assert value == 4


def test_latency_and_response_urls(slack_standin: SlackStandIn, client: WebClient) -> None:
    url = slack_standin.new_response_url(channel=C, user="U0ALICE01")
    slack_standin.latency_s = 0.3
    started = time.monotonic()
    resp = WebhookClient(url).send_dict({"response_type": "ephemeral", "text": "hi"})
    assert resp.status_code == 200 and time.monotonic() - started >= 0.3
    assert WebhookClient(url).send_dict({"text": "x", "blocks": [{"type": "divider"}] * 51}).status_code == 400
    slack_standin.reset_faults()
    WebhookClient(url).send_dict({"response_type": "in_channel", "text": "everyone"})
    assert [p["payload"]["text"] for p in slack_standin.response_url_posts(C)] == ["hi", "everyone"]
    assert [m["text"] for m in slack_standin.messages(C)] == ["everyone"]
