"""Slack's v0 request signature, checked without trusting a byte of the request. Pure.

Slack signs `v0:{timestamp}:{raw body}` with the app's signing secret (HMAC-SHA256) and sends the
timestamp and `v0=<hex>` in `X-Slack-Request-Timestamp` and `X-Slack-Signature`. slack_sdk's verifier
calls `int()` on the timestamp header and decodes the body as UTF-8, so a forged `abc` or a byte
that is not UTF-8 raised inside Bolt; here every outcome is a verdict, never an exception.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from bot.frontdoor.verdict import Refused

MAX_SKEW_S = 300  # Slack's own rule: a request more than five minutes off is a replay
# Digits only (Python's int() would also take "1_0", " 10", "+10" and non-ASCII digits); 12 is far past 2100.
_TIMESTAMP = re.compile(r"[0-9]{1,12}", re.ASCII)
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}", re.ASCII)


def check_signature(secret: bytes, *, timestamp: str | None, signature: str | None, body: bytes, now: float) -> None:
    """Return when Slack signed `body` at `timestamp` (within 5 minutes of `now`); else raise Refused (401)."""
    if timestamp is None:
        raise Refused(401, "no_signature", "no X-Slack-Request-Timestamp")
    if signature is None:
        raise Refused(401, "no_signature", "no X-Slack-Signature")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise Refused(401, "bad_timestamp", "timestamp not an integer")
    if abs(now - int(timestamp)) > MAX_SKEW_S:
        raise Refused(401, "stale_timestamp", f"timestamp more than {MAX_SKEW_S} s off")
    if not _SIGNATURE.fullmatch(signature):
        raise Refused(401, "bad_signature", "signature malformed")
    if not hmac.compare_digest(expected_signature(secret, timestamp, body).encode(), signature.encode()):
        raise Refused(401, "bad_signature", "signature mismatch")


def expected_signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """`v0=<hex>` over the raw bytes (what Slack signs; no decoding, so any body has a signature)."""
    base = b"v0:" + timestamp.encode("ascii") + b":" + body
    return "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
