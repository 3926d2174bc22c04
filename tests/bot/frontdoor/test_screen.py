"""The front door's pure checks, table-driven: length, content type, signature, and the one parse of a body."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import urlencode

import pytest

from bot.frontdoor import Delivery, Refused, check_length, check_signature, parse_http_body, screen_http
from bot.frontdoor.payloads import FORM, JSON, check_content_type, parse_socket_payload
from bot.frontdoor.shapes import check_shapes

SECRET = b"s3cret"
NOW = 1_700_000_000.0


def _sign(timestamp: str, body: bytes, secret: bytes = SECRET) -> str:
    return "v0=" + hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()


def _refusal(call: object) -> tuple[int, str, str]:
    assert callable(call)
    with pytest.raises(Refused) as info:
        call()
    return info.value.status, info.value.reason, info.value.detail


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("0", 0),
        ("262144", 262144),
        ("262145", (413, "too_large")),
        ("99999999999999999999", (400, "bad_length")),
        ("12abc", (400, "bad_length")),
        ("-1", (400, "bad_length")),
        ("\u00b2", (400, "bad_length")),
    ],
    ids=["absent", "empty", "zero", "at-limit", "over-limit", "too-many-digits", "not-a-number", "negative", "sup2"],
)
def test_check_length(header: str | None, expected: object) -> None:
    if isinstance(expected, tuple):
        assert _refusal(lambda: check_length(header))[:2] == expected
    else:
        assert check_length(header) == expected


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (FORM, FORM),
        ("application/x-www-form-urlencoded; charset=utf-8", FORM),
        ("APPLICATION/JSON", JSON),
        (" application/json ;charset=UTF-8", JSON),
        (None, 415),
        ("", 415),
        ("text/plain", 415),
        ("application/json-patch+json", 415),
        ("multipart/form-data; boundary=x", 415),
    ],
    ids=["form", "form-charset", "json-upper", "json-spaces", "none", "empty", "text", "json-patch", "multipart"],
)
def test_check_content_type(content_type: str | None, expected: object) -> None:
    if expected == 415:
        assert _refusal(lambda: check_content_type(content_type))[:2] == (415, "content_type")
    else:
        assert check_content_type(content_type) == expected


BODY = b"command=%2Ffinetune&text=help"
TS = str(int(NOW))


@pytest.mark.parametrize(
    ("timestamp", "signature", "expected"),
    [
        (TS, _sign(TS, BODY), None),
        (str(int(NOW) - 300), _sign(str(int(NOW) - 300), BODY), None),
        (str(int(NOW) - 301), _sign(str(int(NOW) - 301), BODY), "stale_timestamp"),
        (str(int(NOW) + 301), _sign(str(int(NOW) + 301), BODY), "stale_timestamp"),
        (None, _sign(TS, BODY), "no_signature"),
        (TS, None, "no_signature"),
        ("abc", _sign("abc", BODY), "bad_timestamp"),
        ("", _sign("", BODY), "bad_timestamp"),
        ("1e10", "v0=" + "0" * 64, "bad_timestamp"),
        ("1.5", "v0=" + "0" * 64, "bad_timestamp"),
        ("+" + TS, _sign("+" + TS, BODY), "bad_timestamp"),
        ("1_700_000_000", "v0=" + "0" * 64, "bad_timestamp"),
        ("\u0661\u0667", "v0=" + "0" * 64, "bad_timestamp"),
        (TS, "v0=" + "0" * 64, "bad_signature"),
        (TS, _sign(TS, BODY).upper(), "bad_signature"),
        (TS, _sign(TS, BODY) + "0", "bad_signature"),
        (TS, "v0=\u00e9" + "0" * 63, "bad_signature"),
        (TS, _sign(TS, BODY, secret=b"other"), "bad_signature"),
        (TS, _sign(TS, BODY + b"&x=1"), "bad_signature"),
    ],
    ids=[
        "valid",
        "300s-old",
        "301s-old",
        "301s-ahead",
        "no-timestamp",
        "no-signature",
        "abc",
        "empty",
        "1e10",
        "1.5",
        "plus-sign",
        "underscores",
        "arabic-digits",
        "zeros",
        "upper-hex",
        "too-long",
        "not-ascii",
        "other-secret",
        "other-body",
    ],
)
def test_check_signature(timestamp: str | None, signature: str | None, expected: str | None) -> None:
    def call() -> None:
        check_signature(SECRET, timestamp=timestamp, signature=signature, body=BODY, now=NOW)

    if expected is None:
        call()
    else:
        status, reason, _ = _refusal(call)
        assert (status, reason) == (401, expected)


def test_a_body_that_is_not_utf8_is_signed_over_its_bytes_then_refused() -> None:
    body = BODY + b"\xff"
    with pytest.raises(Refused) as info:
        screen_http(content_type=FORM, timestamp=TS, signature=_sign(TS, body), body=body, secret=SECRET, now=NOW)
    assert (info.value.status, info.value.reason) == (400, "not_utf8")


def test_the_order_is_content_type_then_signature_then_shape() -> None:
    def screen(content_type: str | None, signature: str) -> tuple[int, str, str]:
        return _refusal(
            lambda: screen_http(
                content_type=content_type, timestamp=TS, signature=signature, body=b"[]", secret=SECRET, now=NOW
            )
        )

    assert screen("text/plain", _sign(TS, b"[]"))[0] == 415
    assert screen(JSON, "v0=" + "0" * 64)[0] == 401
    assert screen(JSON, _sign(TS, b"[]"))[:2] == (400, "malformed")


COMMAND = {
    "token": "t",
    "team_id": "T1",
    "channel_id": "C1",
    "user_id": "U1",
    "command": "/finetune",
    "text": "help payload",
    "response_url": "https://hooks.slack.com/commands/T1/1/x",
    "trigger_id": "1.2.3",
}


def test_a_command_is_parsed_once_and_unknown_fields_dropped() -> None:
    body = urlencode({**COMMAND, "authorizations": "x", "user": "5"}).encode()
    delivery = parse_http_body(FORM, body)
    assert delivery == Delivery("command", COMMAND) and delivery.key is not None and delivery.metric_kind == "command"


@pytest.mark.parametrize(
    ("media", "body", "status", "detail"),
    [
        (JSON, b"[]", 400, "body not a JSON object"),
        (JSON, b'{"type": "event_callback"', 400, "body not valid JSON"),
        (JSON, b"[" * 50_000, 400, "body not valid JSON"),
        (JSON, b'{"type": "app_rate_limited"}', 404, "Events API type not served"),
        (FORM, b"payload=not-json", 400, "payload not valid JSON"),
        (FORM, b"payload=[]", 400, "payload not a JSON object"),
        (FORM, b"payload=%7B%22type%22%3A%22view_closed%22%7D", 404, "interactivity type not served"),
        (FORM, b"a=1&a=2", 400, "form repeats a field"),
        (FORM, b"a", 400, "form malformed"),
        (FORM, b"text=%FF", 400, "form malformed"),
        (FORM, b"ssl_check=1&token=x", None, "ssl_check"),
        (FORM, urlencode({k: v for k, v in COMMAND.items() if k != "response_url"}).encode(), 400, "response_url"),
        (FORM, urlencode({**COMMAND, "response_url": "ftp://x/y"}).encode(), 400, "not an http(s) URL"),
        (FORM, urlencode({**COMMAND, "response_url": "https://a b/"}).encode(), 400, "not an http(s) URL"),
        (FORM, urlencode({**COMMAND, "response_url": "https://[::1/"}).encode(), 400, "not an http(s) URL"),
    ],
    ids=[
        "json-list",
        "json-truncated",
        "json-deep",
        "events-type-not-served",
        "payload-not-json",
        "payload-list",
        "interactivity-type-not-served",
        "field-twice",
        "not-a-form",
        "escape-not-utf8",
        "ssl-check",
        "no-response-url",
        "response-url-ftp",
        "response-url-space",
        "response-url-bad-ipv6",
    ],
)
def test_parse_http_body(media: str, body: bytes, status: int | None, detail: str) -> None:
    if status is None:
        assert parse_http_body(media, body).kind == detail
        return
    got_status, _, got_detail = _refusal(lambda: parse_http_body(media, body))
    assert got_status == status and detail in got_detail


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ({"event": None}, "event not an object"),
        ({"user": 5}, "user not an id"),
        ({"user": {"id": 5}}, "user not an id"),
        ({"team": []}, "team not an id"),
        ({"authorizations": [1]}, "authorizations not a list of objects"),
        ({"actions": {}}, "actions not a list of objects"),
        ({"x": [{"event_id": 5}]}, "event_id not a string"),
        ({"x": [[[[{"item": "s"}]]]]}, "item not an object"),
    ],
    ids=[
        "event-null",
        "user-int",
        "user-id-int",
        "team-list",
        "authorizations-ints",
        "actions-dict",
        "deep-id",
        "deep",
    ],
)
def test_shapes_refuse_what_bolt_would_trip_on(value: dict[str, object], detail: str) -> None:
    assert detail in _refusal(lambda: check_shapes(value))[2]


def test_shapes_accept_what_slack_sends() -> None:
    check_shapes(
        {
            "type": "block_actions",
            "user": {"id": "U1", "team_id": "T1"},
            "team": None,
            "enterprise": None,
            "channel": {"id": "C1", "name": "x"},
            "container": {"type": "message", "message_ts": "1.2", "channel_id": "C1", "is_ephemeral": False},
            "message": {"type": "message", "ts": "1.2", "text": "", "blocks": [{"type": "section", "text": {}}]},
            "state": {"values": {}},
            "actions": [{"action_id": "a", "text": {"type": "plain_text", "text": "x"}, "value": "help"}],
            "authorizations": [{"enterprise_id": None, "team_id": "T1", "is_bot": True}],
        }
    )


def test_socket_mode_payloads_go_through_the_same_checks() -> None:
    assert parse_socket_payload("slash_commands", COMMAND).kind == "command"
    assert _refusal(lambda: parse_socket_payload("slash_commands", {**COMMAND, "text": 5}))[0] == 400
    assert _refusal(lambda: parse_socket_payload("events_api", {"type": "event_callback", "event": []}))[0] == 400
    assert _refusal(lambda: parse_socket_payload("interactive", ["x"]))[0] == 400
    assert _refusal(lambda: parse_socket_payload("hello", {}))[0] == 404
    envelope = {"type": "event_callback", "event_id": "Ev1", "event": {"type": "reaction_added"}}
    assert json.loads(json.dumps(parse_socket_payload("events_api", envelope).body)) == envelope
