"""Signed requests over real HTTP: verification, ack-first, exactly-once, faults, health and metrics."""

from __future__ import annotations

import logging
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from bot.local.slack import SentRequest, SlackSender, SlackStandIn
from bot.local.slack.sender import event_envelope, reaction_event, slash_command_fields
from bot.local.slack.server import DEFAULT_CHANNEL
from tests.fixtures.slack import SIGNING_SECRET, BotServer, wait_for

C = DEFAULT_CHANNEL


def _metric(server: BotServer, name: str, labels: dict[str, str]) -> float:
    return server.services.metrics.registry.get_sample_value(name, labels) or 0.0


def test_help_is_acked_then_answered_ephemerally(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    sent = sender.slash_command("help")
    assert sent.status == 200 and sent.body == ""
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    assert post["payload"]["response_type"] == "ephemeral" and post["payload"]["blocks"]
    assert post["user"] == "U0ALICE01"
    assert len(bot_server.deliveries("command")) == 1
    assert _metric(bot_server, "finetune_bot_slack_acks_total", {"kind": "command"}) == 1


@pytest.mark.parametrize(
    ("timestamp_offset", "signature", "status"),
    [(0, "v0=" + "0" * 64, 401), (-301, None, 401), (-290, None, 200), (0, None, 200)],
    ids=["bad-signature", "older-than-5-min", "290s-old", "fresh"],
)
def test_signature_and_timestamp(
    sender: SlackSender,
    slack_standin: SlackStandIn,
    bot_server: BotServer,
    timestamp_offset: int,
    signature: str | None,
    status: int,
) -> None:
    event = reaction_event("reaction_added", user="U0BOB0001", channel=C, ts="1.000001", reaction="eyes")
    ts = int(time.time()) + timestamp_offset
    command = sender.slash_command("help", timestamp=ts, signature=signature)
    reaction = sender.event(event, timestamp=ts, signature=signature)
    assert (command.status, reaction.status) == (status, status)
    if status == 401:
        time.sleep(0.3)  # give a (wrongly) started listener the chance to record something
        assert bot_server.deliveries() == [] and slack_standin.response_url_posts() == []
        assert _metric(bot_server, "finetune_bot_slack_requests_total", {"kind": "command", "status": "401"}) == 1
    else:
        wait_for(lambda: len(bot_server.deliveries()) == 2)
        wait_for(lambda: slack_standin.response_url_posts())


def test_a_body_signed_for_another_body_is_refused(sender: SlackSender, bot_server: BotServer) -> None:
    fields = slash_command_fields("help", response_url="http://127.0.0.1:9/x")
    ts = str(int(time.time()))
    from urllib.parse import urlencode

    from bot.local.slack.sender import sign

    forged = urlencode({**fields, "text": "run recipe=x"})
    signature = sign(SIGNING_SECRET, ts, urlencode(fields))
    assert (
        sender.post(forged, "application/x-www-form-urlencoded", timestamp=int(ts), signature=signature).status == 401
    )


def test_same_event_five_times_concurrently_has_one_effect(sender: SlackSender, bot_server: BotServer) -> None:
    envelope = event_envelope(
        reaction_event("reaction_added", user="U0BOB0001", channel=C, ts="1.000001", reaction="white_check_mark")
    )
    retries = [None, None, 1, 2, 3]
    with ThreadPoolExecutor(5) as pool:
        sent = list(pool.map(lambda n: sender.event({}, envelope=envelope, retry_num=n), retries))
    assert [s.status for s in sent] == [200] * 5
    wait_for(lambda: _metric(bot_server, "finetune_bot_slack_duplicate_deliveries_total", {"kind": "event"}) == 4)
    assert [d.key for d in bot_server.deliveries("event")] == [f"event:{envelope['event_id']}"]


def test_same_command_five_times_concurrently_replies_once(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    fields = slash_command_fields("help", response_url=slack_standin.new_response_url(channel=C, user="U0ALICE01"))
    with ThreadPoolExecutor(5) as pool:
        sent = list(pool.map(lambda _: sender.slash_command("", fields=fields), range(5)))
    assert [s.status for s in sent] == [200] * 5
    wait_for(lambda: _metric(bot_server, "finetune_bot_slack_duplicate_deliveries_total", {"kind": "command"}) == 4)
    time.sleep(0.2)
    assert len(slack_standin.response_url_posts()) == 1
    # A new trigger_id is a new delivery, even with the same text.
    sender.slash_command("help")
    wait_for(lambda: len(slack_standin.response_url_posts()) == 2)


def test_acks_stay_under_3s_while_every_slack_call_takes_2s(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    slack_standin.latency_s = 2.0
    with ThreadPoolExecutor(12) as pool:
        sent: list[SentRequest] = list(pool.map(lambda i: sender.slash_command("help"), range(12)))
    assert [s.status for s in sent] == [200] * 12
    slowest = max(s.elapsed_s for s in sent)
    assert slowest < 3.0, f"slowest ack {slowest:.2f} s"
    wait_for(lambda: len(slack_standin.response_url_posts()) == 12, timeout=20)
    # The server-side histogram agrees: every ack fell in a bucket at or below 3 s.
    within = _metric(bot_server, "finetune_bot_slack_ack_latency_seconds_bucket", {"kind": "command", "le": "3.0"})
    assert within == 12


def test_a_429_storm_is_ridden_out_with_nothing_lost(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    slack_standin.rate_limit("*", 20, retry_after=1)  # response_url posts and Web API calls alike
    with ThreadPoolExecutor(10) as pool:
        sent = list(pool.map(lambda i: sender.slash_command("help"), range(10)))
    assert [s.status for s in sent] == [200] * 10
    posts = wait_for(lambda: (p := slack_standin.response_url_posts()) and len(p) == 10 and p, timeout=30)
    assert len({p["url_id"] for p in posts}) == 10  # every reply landed exactly once
    assert (
        _metric(bot_server, "finetune_bot_slack_api_errors_total", {"method": "response_url", "error": "ratelimited"})
        == 20
    )
    assert _metric(bot_server, "finetune_bot_listener_errors_total", {"kind": "command"}) == 0


def test_healthz_and_metrics(bot_server: BotServer, sender: SlackSender) -> None:
    sender.slash_command("help")
    with urllib.request.urlopen(bot_server.url + "/healthz") as resp:
        assert resp.status == 200 and b'"ok"' in resp.read()
    with urllib.request.urlopen(bot_server.url + "/metrics") as resp:
        text = resp.read().decode()
        assert resp.headers["Content-Type"].startswith("text/plain")
    for name in (
        "finetune_bot_slack_requests_total",
        "finetune_bot_slack_acks_total",
        "finetune_bot_slack_ack_latency_seconds_bucket",
        "finetune_bot_slack_duplicate_deliveries",
        "finetune_bot_slack_api_errors",
        "finetune_bot_polyaxon_errors",
    ):
        assert name in text
    assert 'finetune_bot_slack_acks_total{kind="command"} 1.0' in text
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(bot_server.url + "/slack/events")
    assert info.value.code == 405


def test_logs_carry_no_secrets(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, caplog: pytest.LogCaptureFixture
) -> None:
    def traffic(n: int) -> None:
        sender.slash_command("help")
        sender.reaction("reaction_added", user="U0BOB0001", channel=C, ts="1.000001", reaction="eyes")
        sender.slash_command("help", signature="v0=" + "0" * 64)
        wait_for(lambda: len(slack_standin.response_url_posts()) == n)
        bot_server.app.client.chat_postMessage(channel=C, text="card")

    caplog.set_level(logging.INFO)
    traffic(1)
    # An answered request's line is DEBUG unless FINETUNE_ACCESS_LOG (tests/bot/test_web_log.py); its work's is INFO.
    assert "slack command answered 200" not in caplog.text and "command team=T0LOCAL01 user=U0ALICE01" in caplog.text
    assert "slack command answered 401" in caplog.text and "event reaction_added event_id=Ev" in caplog.text
    # At INFO not even the response_url (a short-lived credential for the channel) appears.
    for secret in (slack_standin.bot_token, SIGNING_SECRET, slack_standin.app_token, "/hooks/response/"):
        assert secret not in caplog.text
    caplog.clear()
    caplog.set_level(logging.DEBUG)  # slack_sdk's DEBUG lines name URLs, but redact the Authorization header
    traffic(2)
    assert "slack command answered 200" in caplog.text
    for secret in (slack_standin.bot_token, SIGNING_SECRET, slack_standin.app_token):
        assert secret not in caplog.text


def test_an_unexpected_error_is_logged_counted_and_referenced_to_the_user(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, caplog: pytest.LogCaptureFixture
) -> None:
    with bot_server.engine.begin() as conn:  # a real failure after the ack: the audit table is gone
        conn.execute(text("DROP TABLE audit_entries"))
    assert sender.slash_command("help").status == 200
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    message = post["payload"]["text"]
    assert "Something went wrong" in message and post["payload"]["response_type"] == "ephemeral"
    ref = message.split("reference `", 1)[1].split("`", 1)[0]
    assert f"listener failed (ref {ref}, kind=command): OperationalError" in caplog.text
    assert "Traceback" in caplog.text
    assert _metric(bot_server, "finetune_bot_listener_errors_total", {"kind": "command"}) == 1


def test_a_dead_response_url_is_an_error_not_a_crash(
    sender: SlackSender, bot_server: BotServer, slack_standin: SlackStandIn
) -> None:
    dead = slack_standin.root_url + "/hooks/response/T0LOCAL01/expired"
    assert sender.slash_command("help", response_url=dead).status == 200
    wait_for(lambda: _metric(bot_server, "finetune_bot_listener_errors_total", {"kind": "command"}) == 1)
    assert _metric(bot_server, "finetune_bot_slack_api_errors_total", {"method": "response_url", "error": "http_404"})
    assert sender.slash_command("help").status == 200  # the bot carries on
    wait_for(lambda: slack_standin.response_url_posts())
