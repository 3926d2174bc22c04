"""The one parse of a Slack delivery: HTTP bodies and Socket Mode payloads to a `Delivery`, or `Refused`. Pure.

Bolt parses bodies on the assumption that Slack sent them: it reads any form body that mentions
`payload` as interactivity (a command whose text says "payload" came out empty), takes any body that
starts with `{` for JSON, and indexes nested fields without checking their types. The front door parses
once, checks the shapes Bolt and the listeners rely on, and hands Bolt the parsed body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bot.frontdoor.shapes import check_shapes
from bot.frontdoor.verdict import Delivery, Refused, malformed

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
MAX_FORM_FIELDS = 64  # a slash command has 15; interactivity one

# What Slack sends with a slash command; anything else in the form is dropped before Bolt sees it.
COMMAND_FIELDS = frozenset(
    {
        "token",
        "team_id",
        "team_domain",
        "enterprise_id",
        "enterprise_name",
        "channel_id",
        "channel_name",
        "user_id",
        "user_name",
        "command",
        "text",
        "api_app_id",
        "is_enterprise_install",
        "response_url",
        "trigger_id",
    }
)
# The listener replies through response_url and names the delivery by team, user, channel and trigger_id.
COMMAND_REQUIRED = ("command", "team_id", "user_id", "channel_id", "response_url", "trigger_id")
SOCKET_ENVELOPES = ("slash_commands", "events_api", "interactive")
# Whitespace (Unicode's too) and control characters: never in a URL Slack sends. One regex search, not a
# per-character loop: this runs on every slash command's ack path.
_UNSAFE_IN_URL = re.compile(r"[\s\x00-\x1f\x7f]")
SERVED_INTERACTIVITY = frozenset({"block_actions", "view_submission", "message_action"})


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header, lower case, without parameters (`; charset=…`)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_content_type(content_type: str | None) -> str:
    """FORM or JSON (what Slack sends); raise Refused (415) for anything else."""
    media = media_type(content_type)
    if media in (FORM, JSON):
        return media
    raise Refused(415, "content_type", "no content type" if not media else "content type neither form nor JSON")


def parse_http_body(media: str, body: bytes) -> Delivery:
    """A signed HTTP body of media type FORM or JSON (see `check_content_type`) to a Delivery."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "not_utf8", "body not UTF-8") from None
    if media == JSON:
        return parse_events_api(load_object(text, "body"))
    fields = parse_form(text)
    if "payload" in fields:
        if "command" in fields:
            raise malformed("form both a slash command and an interactivity payload")
        return parse_interactivity(load_object(fields["payload"], "payload"))
    if "command" in fields:
        return parse_command(fields)
    if fields.get("ssl_check") == "1":  # Slack checks a slash command's certificate with a signed ssl_check=1
        return Delivery("ssl_check", {"ssl_check": "1"})
    raise malformed("form neither a slash command nor an interactivity payload")


def parse_socket_payload(envelope_type: str, payload: object) -> Delivery:
    """A Socket Mode request's payload (already JSON, from Slack's authenticated websocket) to a Delivery."""
    if envelope_type not in SOCKET_ENVELOPES:
        raise Refused(404, "unsupported", "Socket Mode envelope type not served")
    if not isinstance(payload, dict):
        raise malformed("payload not a JSON object")
    if envelope_type == "slash_commands":
        return parse_command(payload)
    if envelope_type == "events_api":
        return parse_events_api(payload)
    return parse_interactivity(payload)


def load_object(text: str, what: str) -> dict[str, Any]:
    """A JSON object from text; raise Refused (400) for invalid, truncated or non-object JSON."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, an int past the digit limit, nesting past the stack
        raise malformed(f"{what} not valid JSON") from None
    if not isinstance(value, dict):
        raise malformed(f"{what} not a JSON object")
    return value


def parse_form(text: str) -> dict[str, str]:
    """Form fields, each once; raise Refused (400) for a malformed form, bad percent-encoding or a repeated field."""
    try:
        pairs = parse_qsl(
            text, keep_blank_values=True, strict_parsing=True, errors="strict", max_num_fields=MAX_FORM_FIELDS
        )
    except ValueError:  # also UnicodeDecodeError from %-escapes that are not UTF-8
        raise malformed("form malformed") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise malformed("form repeats a field")
    return fields


def parse_command(fields: Mapping[str, Any]) -> Delivery:
    """A slash command: every field the listener needs present, the response_url an http(s) URL."""
    for name in COMMAND_REQUIRED:
        value = fields.get(name)
        if not isinstance(value, str) or not value:
            raise malformed(f"slash command without {name}")
    if not isinstance(fields.get("text"), str):
        raise malformed("slash command without text")
    if not str(fields["command"]).startswith("/"):
        raise malformed("command not a slash command")
    if not is_http_url(str(fields["response_url"])):
        raise malformed("response_url not an http(s) URL")
    body = {k: v for k, v in fields.items() if k in COMMAND_FIELDS and isinstance(v, str | bool)}
    return Delivery("command", body)


def parse_events_api(body: dict[str, Any]) -> Delivery:
    """An Events API body: `url_verification` (answered with its challenge) or an `event_callback` envelope."""
    check_shapes(body)
    kind = body.get("type")
    if kind == "url_verification":
        challenge = body.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise malformed("url_verification without challenge")
        return Delivery("url_verification", {"type": kind, "challenge": challenge})
    if kind == "event_callback":
        if not _nonempty_str(body.get("event_id")):
            raise malformed("event_callback without event_id")
        event = body.get("event")
        if not isinstance(event, dict) or not _nonempty_str(event.get("type")):
            raise malformed("event_callback without an event and its type")
        return Delivery("event", body)
    raise Refused(404, "unsupported", "Events API type not served")


def parse_interactivity(payload: dict[str, Any]) -> Delivery:
    """An interactivity payload: buttons and form inputs (`block_actions`), form submissions (`view_submission`)
    and message shortcuts (`message_action`); anything else is not served."""
    check_shapes(payload)
    kind = payload.get("type")
    if not _nonempty_str(kind):
        raise malformed("interactivity payload without type")
    if kind not in SERVED_INTERACTIVITY:
        raise Refused(404, "unsupported", "interactivity type not served")
    user = payload.get("user")
    if not isinstance(user, dict) or not _nonempty_str(user.get("id")):
        raise malformed(f"{kind} without user")
    if kind == "block_actions":
        actions = payload.get("actions")
        if not actions or not all(_nonempty_str(a.get("action_id")) for a in actions):
            raise malformed("block_actions without actions and their action_id")
        if not isinstance(payload.get("channel") or {}, dict):  # the listener reads `channel.id` (Slack: an object)
            raise malformed("block_actions channel not an object")
    elif kind == "view_submission":
        view = payload.get("view")
        if (
            not isinstance(view, dict)
            or not _nonempty_str(view.get("id"))
            or not _nonempty_str(view.get("callback_id"))
        ):
            raise malformed("view_submission without a view, its id and callback_id")
        if not isinstance(view.get("state") or {}, dict):
            raise malformed("view_submission state not an object")
    else:  # message_action: the listener reads the channel's id and the message's ts
        if not _nonempty_str(payload.get("callback_id")) or not _nonempty_str(payload.get("trigger_id")):
            raise malformed("message_action without callback_id and trigger_id")
        channel, message = payload.get("channel"), payload.get("message")
        if not isinstance(channel, dict) or not _nonempty_str(channel.get("id")):
            raise malformed("message_action without its channel")
        if not isinstance(message, dict) or not _nonempty_str(message.get("ts")):
            raise malformed("message_action without its message")
    url = payload.get("response_url")
    if url is not None and not is_http_url(url):
        raise malformed("response_url not an http(s) URL")
    return Delivery("action", payload)


def is_http_url(url: str) -> bool:
    """An absolute http(s) URL with a host and no whitespace or control characters."""
    if _UNSAFE_IN_URL.search(url):
        return False
    try:
        parts = urlsplit(url)
        return parts.scheme in ("https", "http") and bool(parts.hostname)
    except ValueError:  # e.g. an invalid IPv6 literal or port
        return False


def _nonempty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)
