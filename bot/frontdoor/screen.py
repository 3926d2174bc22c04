"""The checks of one HTTP request to `/slack/events`, in order: size, content type, signature, shape. Pure."""

from __future__ import annotations

import re

from bot.frontdoor.payloads import check_content_type, parse_http_body
from bot.frontdoor.signature import check_signature
from bot.frontdoor.verdict import Delivery, Refused

# Slack's payloads are a few KiB (a command is under 1 KiB, a view with blocks some tens): far below this.
MAX_BODY_BYTES = 256 * 1024
_DIGITS = re.compile(r"[0-9]{1,19}", re.ASCII)


def check_length(content_length: str | None, limit: int = MAX_BODY_BYTES) -> int | None:
    """The declared body length (None when none was declared); raise Refused when it is invalid or over `limit`."""
    if content_length is None or content_length == "":
        return None
    if not _DIGITS.fullmatch(content_length):
        raise Refused(400, "bad_length", "Content-Length not a number")
    length = int(content_length)
    if length > limit:
        raise Refused(413, "too_large", f"body over {limit} bytes")
    return length


def screen_http(
    *,
    content_type: str | None,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    secret: bytes,
    now: float,
) -> Delivery:
    """A body within the size limit to a Delivery, or Refused: 415 (not form/JSON), 401 (not signed by Slack
    within 5 minutes), 400 (not a shape Slack sends), 404 (a kind of delivery the bot does not serve)."""
    media = check_content_type(content_type)
    check_signature(secret, timestamp=timestamp, signature=signature, body=body, now=now)
    # Only now is anything in the body read: it is Slack's.
    return parse_http_body(media, body)
