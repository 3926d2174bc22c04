"""Issue 15, items 2, 5 and 7: malformed bodies, a command without response_url, wrong content types.

Signed or not, none of them answers 5xx, reaches a listener or posts anywhere: unsigned they are 401,
signed they are 400 (not a shape Slack sends), 404 (a kind of delivery the bot does not serve) or 415.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.sender import block_actions_payload, event_envelope, reaction_event, slash_command_fields
from tests.fixtures.hostile import FORM, JSON, Scene, Trap, signed_headers
from tests.fixtures.slack import BotServer, wait_for

TOKEN = "standin-verification-token"


def _command(url: str, **overrides: str | None) -> dict[str, str]:
    fields = slash_command_fields("run recipe=sft-tiny note=secret-words", response_url=url)
    for name, value in overrides.items():
        if value is None:
            fields.pop(name)
        else:
            fields[name] = value
    return fields


def _envelope(**overrides: Any) -> dict[str, Any]:
    event = reaction_event("reaction_added", user="U0BOB0001", channel="C0TRAIN01", ts="1.000001", reaction="eyes")
    return {**event_envelope(event), **overrides}


def _payload(url: str, **overrides: Any) -> bytes:
    payload = {**block_actions_payload("finetune_command", "help", response_url=url), **overrides}
    return urlencode({"payload": json.dumps(payload)}).encode()


def _malformed_cases(url: str) -> list[tuple[str, str, bytes, str]]:
    """(id, content type, body, what the log line says) for bodies Slack never sends, naming `url` as response_url."""
    command = urlencode(_command(url))
    reaction = _envelope()
    return [
        ("json-list", JSON, b"[]", "body not a JSON object"),
        ("json-null", JSON, b"null", "body not a JSON object"),
        ("json-truncated", JSON, json.dumps(reaction).encode()[:-7], "body not valid JSON"),
        ("json-nested-past-the-stack", JSON, b"[" * 100_000, "body not valid JSON"),
        ("json-int-past-the-digit-limit", JSON, b'{"type": ' + b"9" * 5000 + b"}", "body not valid JSON"),
        (
            "json-nested-deep",
            JSON,
            json.dumps(
                {"type": "event_callback", "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}
            ).encode(),
            "nested deeper",
        ),
        ("payload-not-json", FORM, b"payload=not-json", "payload not valid JSON"),
        ("payload-list", FORM, b"payload=[]", "payload not a JSON object"),
        (
            "payload-truncated",
            FORM,
            b"payload=" + quote('{"type": "block_actions", "actions": [').encode(),
            "payload not valid JSON",
        ),
        ("not-utf8", FORM, command.encode() + b"\xff\xfe", "body not UTF-8"),
        ("percent-escape-not-utf8", FORM, command.encode() + b"%FF", "form malformed"),
        ("not-a-form", FORM, b"this is not a form", "form malformed"),
        ("empty-form", FORM, b"", "form neither a slash command nor an interactivity payload"),
        ("field-twice", FORM, f"{command}&response_url={quote(url + '/other')}".encode(), "form repeats a field"),
        ("command-and-payload", FORM, f"{command}&payload=%7B%7D".encode(), "both a slash command and"),
        ("event-not-an-object", JSON, json.dumps(_envelope(event="x")).encode(), "event not an object"),
        (
            "event-without-type",
            JSON,
            json.dumps(_envelope(event={"user": "U1"})).encode(),
            "without an event and its type",
        ),
        ("event-without-event-id", JSON, json.dumps(_envelope(event_id="")).encode(), "without event_id"),
        (
            "event-user-a-number",
            JSON,
            json.dumps(_envelope(event={**reaction["event"], "user": 5})).encode(),
            "user not an id",
        ),
        (
            "event-item-a-list",
            JSON,
            json.dumps(_envelope(event={**reaction["event"], "item": []})).encode(),
            "item not an object",
        ),
        (
            "authorizations-a-string",
            JSON,
            json.dumps(_envelope(authorizations="x")).encode(),
            "authorizations not a list",
        ),
        ("url-verification-without-challenge", JSON, b'{"type": "url_verification"}', "without challenge"),
        ("actions-a-string", FORM, _payload(url, actions="x"), "actions not a list of objects"),
        ("action-id-a-number", FORM, _payload(url, actions=[{"action_id": 5}]), "action_id not a string"),
        ("no-actions", FORM, _payload(url, actions=[]), "without actions"),
        ("user-a-string", FORM, _payload(url, user="U0ALICE01"), "block_actions without user"),
        ("payload-without-type", FORM, b"payload=" + quote('{"actions": []}').encode(), "without type"),
        ("action-response-url-not-http", FORM, _payload(url, response_url="file:///etc/passwd"), "not an http(s) URL"),
    ]


MALFORMED_IDS = [case[0] for case in _malformed_cases("http://127.0.0.1:9/hooks/response/ids")]


@pytest.mark.parametrize("case", MALFORMED_IDS)
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_a_malformed_body_is_4xx_and_reaches_nothing(shared_scene: Scene, trap: Trap, case: str, signed: bool) -> None:
    """Item 2: these answered 500 (AttributeError, JSONDecodeError, TypeError, IndexError, UnicodeDecodeError)."""
    [(_, content_type, body, detail)] = [c for c in _malformed_cases(trap.url()) if c[0] == case]
    headers = signed_headers(body, content_type) if signed else {"Content-Type": content_type}
    reply = shared_scene.send(body, headers)
    assert reply.status == (400 if signed else 401), reply
    shared_scene.assert_no_trace(TOKEN, trap.url(), "secret-words", "response_url=")
    assert trap.hits == []
    if signed:
        assert detail in shared_scene.caplog.text


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (JSON, b'{"type": "app_rate_limited", "team_id": "T0LOCAL01", "minute_rate_limited": 1}'),
        (JSON, b'{"type": "something_new"}'),
    ],
    ids=["app_rate_limited", "unknown-events-type"],
)
def test_an_events_api_type_the_bot_does_not_serve_is_404(shared_scene: Scene, content_type: str, body: bytes) -> None:
    reply = shared_scene.send(body, signed_headers(body, content_type))
    assert reply.status == 404
    shared_scene.assert_no_trace()


def test_an_interactivity_type_the_bot_does_not_serve_is_404(shared_scene: Scene, trap: Trap) -> None:
    body = _payload(trap.url(), type="view_closed", view={"id": "V1", "callback_id": "x"})
    reply = shared_scene.send(body, signed_headers(body))
    assert reply.status == 404
    shared_scene.assert_no_trace(TOKEN, trap.url())
    assert trap.hits == []


@pytest.mark.parametrize(
    ("overrides", "detail"),
    [
        ({"response_url": None}, "slash command without response_url"),
        ({"response_url": ""}, "slash command without response_url"),
        ({"response_url": "not a url"}, "response_url not an http(s) URL"),
        ({"response_url": "javascript:alert(1)"}, "response_url not an http(s) URL"),
        ({"response_url": "http://"}, "response_url not an http(s) URL"),
        ({"text": None}, "slash command without text"),
        ({"user_id": None}, "slash command without user_id"),
        ({"channel_id": ""}, "slash command without channel_id"),
        ({"trigger_id": None}, "slash command without trigger_id"),
        ({"team_id": None}, "slash command without team_id"),
        ({"command": "finetune"}, "command not a slash command"),
    ],
    ids=[
        "no-response_url",
        "empty-response_url",
        "response_url-not-a-url",
        "response_url-javascript",
        "response_url-without-host",
        "no-text",
        "no-user_id",
        "empty-channel_id",
        "no-trigger_id",
        "no-team_id",
        "command-without-slash",
    ],
)
def test_a_signed_command_missing_what_the_listener_needs_is_400(
    shared_scene: Scene, trap: Trap, overrides: dict[str, str | None], detail: str
) -> None:
    """Item 5: a signed command without response_url raised KeyError after the ack."""
    body = urlencode(_command(trap.url(), **overrides)).encode()
    reply = shared_scene.send(body, signed_headers(body))
    assert reply.status == 400 and detail.encode() in reply.body
    shared_scene.assert_no_trace(TOKEN, "secret-words")
    assert detail in shared_scene.caplog.text and trap.hits == []


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/xml", "multipart/form-data; boundary=x", "application/jsonp", "form", ""],
    ids=["none", "text-plain", "xml", "multipart", "jsonp", "bare-word", "empty"],
)
@pytest.mark.parametrize("kind", ["command", "event"])
def test_a_signed_body_with_a_content_type_slack_never_sends_is_415(
    shared_scene: Scene, trap: Trap, content_type: str | None, kind: str
) -> None:
    """Item 7: signed bodies with text/plain or no content type were carried out."""
    body = urlencode(_command(trap.url())).encode() if kind == "command" else json.dumps(_envelope()).encode()
    reply = shared_scene.send(body, signed_headers(body, content_type))
    assert reply.status == 415
    shared_scene.assert_no_trace(TOKEN, trap.url(), "secret-words")
    assert trap.hits == []


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded; charset=utf-8", "Application/X-WWW-Form-Urlencoded"],
    ids=["with-charset", "mixed-case"],
)
def test_the_content_types_slack_sends_are_accepted_with_parameters(
    bot_server: BotServer, slack_standin: SlackStandIn, content_type: str
) -> None:
    fields = slash_command_fields("help", response_url=slack_standin.new_response_url(channel="C0TRAIN01"))
    body = urlencode(fields).encode()
    from tests.fixtures.hostile import raw_post

    assert raw_post(bot_server.url, body, signed_headers(body, content_type)).status == 200
    wait_for(lambda: slack_standin.response_url_posts())


def test_url_verification_still_answers_its_challenge(shared_scene: Scene) -> None:
    body = json.dumps({"token": TOKEN, "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"}).encode()  # fmt: skip
    reply = shared_scene.send(body, signed_headers(body, JSON))
    assert reply.status == 200
    assert json.loads(reply.body) == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    assert shared_scene.send(body, {"Content-Type": JSON}).status == 401


@pytest.mark.parametrize(
    ("text", "overrides"),
    [("help payload", {}), ("help", {"channel_name": "payload-runs"}), ("help", {"user_name": "payload=1"})],
    ids=["text-says-payload", "channel-named-payload", "user-named-payload"],
)
def test_a_command_that_mentions_payload_is_answered(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, text: str, overrides: dict[str, str]
) -> None:
    """Bolt read any form body containing `payload` as interactivity: the command came out empty (404)."""
    url = slack_standin.new_response_url(channel="C0TRAIN01", user="U0ALICE01")
    fields = {**slash_command_fields(text, response_url=url), **overrides}
    assert sender.slash_command("", fields=fields).status == 200
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    assert post["payload"]["response_type"] == "ephemeral"


def test_fields_slack_does_not_send_with_a_command_are_dropped(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    """Bolt indexed `authorizations`, `user` and `event` as objects: a signed form with them as strings was a 500."""
    url = slack_standin.new_response_url(channel="C0TRAIN01", user="U0ALICE01")
    fields = {**slash_command_fields("help", response_url=url), "authorizations": "x", "event": "y", "user": "5"}
    assert sender.slash_command("", fields=fields).status == 200
    wait_for(lambda: slack_standin.response_url_posts())
    metrics = bot_server.services.metrics.registry
    assert (metrics.get_sample_value("finetune_bot_listener_errors_total", {"kind": "command"}) or 0) == 0


def test_a_good_delivery_after_refusals_is_carried_out(
    scene: Scene, sender: SlackSender, slack_standin: SlackStandIn
) -> None:
    for body in (b"[]", b"payload=[]"):
        scene.send(body, signed_headers(body, JSON if body == b"[]" else FORM))
    assert sender.slash_command("help").status == 200
    wait_for(lambda: slack_standin.response_url_posts())
    time.sleep(0.1)
    assert len(slack_standin.response_url_posts()) == 1
