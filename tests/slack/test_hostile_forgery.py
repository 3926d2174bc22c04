"""Issue 15, items 1 and 3: forged and oversized requests at the front door, over raw HTTP.

Each request is refused with a 4xx before anything in it is read, nothing is posted anywhere (the
response_url points at a trap that records any hit), no listener runs, and the log has one line
that quotes nothing of the request.
"""

from __future__ import annotations

import json
import logging
import time
from urllib.parse import urlencode

import pytest
from slack_bolt.request import BoltRequest

from bot.frontdoor import MAX_BODY_BYTES
from bot.local.slack.sender import event_envelope, reaction_event, slash_command_fields
from bot.web import SERVER_BODY_CEILING
from tests.fixtures.hostile import FORM, JSON, Scene, Trap, raw_post, sign_bytes, signed_headers
from tests.fixtures.slack import BotServer

SECRET_TEXT = "run recipe=sft-tiny lr=hunter2-in-the-text"
VERIFICATION_TOKEN = "standin-verification-token"


def forged_command(trap: Trap, text: str = SECRET_TEXT) -> bytes:
    """A complete slash command whose response_url is the trap's."""
    return urlencode(slash_command_fields(text, response_url=trap.url())).encode()


def body_secrets(trap: Trap) -> tuple[str, ...]:
    """What of a forged body must never reach the log: its token, response_url and text."""
    return (VERIFICATION_TOKEN, trap.url(), "/hooks/response/", "hunter2", "token=", "response_url")


def _refused(scene: Scene, reason: str) -> float:
    return (
        scene.server.services.metrics.registry.get_sample_value(
            "finetune_bot_requests_refused_total", {"reason": reason}
        )
        or 0.0
    )


@pytest.mark.parametrize("timestamp", ["abc", "", "1e10", "1.5", "+1700000000", "1_700_000_000", "\u00b2"])
@pytest.mark.parametrize("signature", ["zeros", "absent", "signed"])
def test_a_non_integer_timestamp_is_401_and_posts_nothing(
    scene: Scene, trap: Trap, timestamp: str, signature: str
) -> None:
    """Item 1: Bolt's verifier raised ValueError here, and the error handler posted to the forger's URL (500)."""
    body = forged_command(trap)
    headers = {"Content-Type": FORM, "X-Slack-Request-Timestamp": timestamp}
    if signature == "zeros":
        headers["X-Slack-Signature"] = "v0=" + "0" * 64
    elif signature == "signed":  # even signed with the real secret: Slack's timestamps are integers
        headers["X-Slack-Signature"] = sign_bytes(timestamp, body)
    reply = scene.send(body, headers)
    assert reply.status == 401 and reply.body == b"invalid request\n"
    scene.assert_no_trace(*body_secrets(trap))
    assert trap.hits == []
    expected = "no X-Slack-Signature" if signature == "absent" else "timestamp not an integer"
    assert expected in scene.caplog.text


@pytest.mark.parametrize(
    ("offset", "signature", "detail", "reason"),
    [
        (0, "v0=" + "0" * 64, "signature mismatch", "bad_signature"),
        (0, "v0=" + "g" * 64, "signature malformed", "bad_signature"),
        (0, "v1=abc", "signature malformed", "bad_signature"),
        (0, "v0=\u00e9" * 8, "signature malformed", "bad_signature"),
        (-301, None, "timestamp more than 300 s off", "stale_timestamp"),
        # Not +301: int(time.time()) drops up to a second and the bot reads its clock later (under load, much
        # later), so +301 could land within the 300 s; it did here.
        (+310, None, "timestamp more than 300 s off", "stale_timestamp"),
    ],
    ids=["zeros", "not-hex", "not-v0", "not-ascii", "stale", "future"],
)
@pytest.mark.parametrize("kind", ["command", "event"])
def test_a_bad_signature_or_stale_timestamp_is_401_and_posts_nothing(
    scene: Scene, trap: Trap, offset: int, signature: str | None, detail: str, reason: str, kind: str
) -> None:
    if kind == "command":
        body, content_type = forged_command(trap), FORM
    else:
        event = reaction_event("reaction_added", user="U0BOB0001", channel="C0TRAIN01", ts="1.000001", reaction="eyes")
        body, content_type = json.dumps(event_envelope(event)).encode(), JSON
    ts = str(int(time.time()) + offset)
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature if signature is not None else sign_bytes(ts, body),
    }
    reply = scene.send(body, headers)
    assert reply.status == 401
    scene.assert_no_trace(*body_secrets(trap))
    assert detail in scene.caplog.text and _refused(scene, reason) == 1


def test_no_slack_headers_at_all_is_401(scene: Scene, trap: Trap) -> None:
    reply = scene.send(forged_command(trap), {"Content-Type": FORM})
    assert reply.status == 401
    scene.assert_no_trace(*body_secrets(trap))
    assert "no X-Slack-Request-Timestamp" in scene.caplog.text


def test_bolt_never_logs_a_refused_body(scene: Scene, trap: Trap) -> None:
    """Item 3: Bolt's `Invalid request signature detected (… body: token=…)` line never appears."""
    body = forged_command(trap)
    for signature in ("v0=" + "0" * 64, ""):
        scene.send(body, {"Content-Type": FORM, "X-Slack-Request-Timestamp": str(int(time.time())),
                          "X-Slack-Signature": signature})  # fmt: skip
        scene.assert_no_trace(*body_secrets(trap), "Invalid request signature")


def test_bolt_on_its_own_neither_logs_bodies_nor_replies_to_unverified_ones(
    bot_server: BotServer, trap: Trap, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind the front door by design, but Bolt alone (its own signature check) must not leak either."""
    caplog.set_level(logging.INFO)
    body = forged_command(trap).decode()
    statuses = []
    for timestamp in (str(int(time.time())), "abc"):  # a refusal by Bolt's check; a ValueError inside it
        request = BoltRequest(
            body=body,
            headers={"content-type": FORM, "x-slack-request-timestamp": timestamp, "x-slack-signature": "v0=00"},
        )
        statuses.append(bot_server.app.dispatch(request).status)
    assert statuses == [401, 500]
    assert "listener failed" in caplog.text  # the ValueError reached the error handler…
    time.sleep(0.3)
    assert trap.hits == []  # the error handler never posts to a response_url the front door did not admit
    for secret in body_secrets(trap):
        assert secret not in caplog.text


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_a_body_over_the_limit_is_413_unread(scene: Scene, trap: Trap, signed: bool) -> None:
    """Item 3: an unsigned 1.1 MB body was read into memory and written to the log."""
    filler = "x" * 1_100_000
    body = forged_command(trap, text=f"{SECRET_TEXT} {filler}")
    assert MAX_BODY_BYTES < len(body) < SERVER_BODY_CEILING
    headers = signed_headers(body) if signed else {"Content-Type": FORM}
    reply = scene.send(body, headers)
    assert reply.status == 413
    scene.assert_no_trace(*body_secrets(trap), "xxxxxxxx")
    assert f"body over {MAX_BODY_BYTES} bytes" in scene.caplog.text and _refused(scene, "too_large") == 1


def test_a_chunked_body_over_the_limit_is_413(scene: Scene, trap: Trap) -> None:
    """No Content-Length (chunked): waitress counts the bytes, the front door refuses past the limit."""
    body = forged_command(trap, text=f"{SECRET_TEXT} {'y' * (MAX_BODY_BYTES + 10)}")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[i : i + 65536] for i in range(0, len(body), 65536)))
    headers = {**signed_headers(body), "Transfer-Encoding": "chunked", "Content-Length": ""}
    del headers["Content-Length"]
    scene.snapshot()
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", int(scene.server.url.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.putrequest("POST", "/slack/events", skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        conn.send(chunks + b"0\r\n\r\n")
        status = conn.getresponse().status
    finally:
        conn.close()
    assert status == 413
    scene.assert_no_trace(*body_secrets(trap), "yyyyyyyy")


def test_a_body_past_the_servers_ceiling_is_never_buffered(scene: Scene, trap: Trap) -> None:
    """Past SERVER_BODY_CEILING waitress refuses on the Content-Length alone (413, or it closes the connection)."""
    body = forged_command(trap, text="z" * (SERVER_BODY_CEILING + 10))
    scene.snapshot()
    reply = raw_post(scene.server.url, body, signed_headers(body))
    assert reply.status in (413, 0), reply
    time.sleep(0.3)
    assert trap.hits == [] and "zzzzzzzz" not in scene.caplog.text
    assert scene.standin.response_url_posts() == []


def test_an_invalid_content_length_is_400(scene: Scene, trap: Trap) -> None:
    body = forged_command(trap)
    reply = scene.send(body, {**signed_headers(body), "Content-Length": "12abc"})
    assert reply.status == 400
    time.sleep(0.3)
    assert trap.hits == []
    for secret in body_secrets(trap):
        assert secret not in scene.caplog.text


def test_refusals_are_counted_in_metrics(scene: Scene, trap: Trap, bot_server: BotServer) -> None:
    scene.send(forged_command(trap), {"Content-Type": FORM, "X-Slack-Request-Timestamp": "abc",
                                      "X-Slack-Signature": "v0=0"})  # fmt: skip
    import urllib.request

    with urllib.request.urlopen(bot_server.url + "/metrics") as resp:
        text = resp.read().decode()
    assert 'finetune_bot_requests_refused_total{reason="bad_timestamp"} 1.0' in text
    assert 'finetune_bot_slack_requests_total{kind="command",status="401"} 1.0' in text
