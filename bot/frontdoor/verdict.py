"""What the front door decides about one request: a `Delivery` let in, or `Refused` with a status and a reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.deliveries.keys import key_of

# Labels of the metrics and the one log line of a refusal: a fixed vocabulary, never anything from the request.
REASONS = frozenset(
    {
        "too_large",
        "bad_length",
        "content_type",
        "no_signature",
        "bad_timestamp",
        "stale_timestamp",
        "bad_signature",
        "not_utf8",
        "malformed",
        "unsupported",
    }
)


class Refused(Exception):
    """A request the front door turns away: HTTP `status`, a `reason` label, a `detail` for the log line.

    `detail` is written by the front door itself (field names from its own rules, sizes, limits): it never
    quotes the request, so it is safe to log and to answer with.
    """

    def __init__(self, status: int, reason: str, detail: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown refusal reason {reason!r}")
        super().__init__(f"{status} {detail}")
        self.status = status
        self.reason = reason
        self.detail = detail


def malformed(detail: str) -> Refused:
    """A 400 for a body that is not what Slack sends."""
    return Refused(400, "malformed", detail)


@dataclass(frozen=True)
class Delivery:
    """A request the front door let in: signed by Slack (or from Slack's websocket) and of a shape Slack sends.

    `kind`: command, event, action, url_verification or ssl_check. `body`: what the listeners receive,
    the one parse of the request (Bolt never reads the raw bytes again).
    """

    kind: str
    body: Mapping[str, Any]

    @property
    def key(self) -> str | None:
        """The delivery key (what makes a retry the same delivery), or None for kinds that carry no work."""
        found = key_of(self.body)
        return found[1] if found is not None else None

    @property
    def metric_kind(self) -> str:
        """command, event, action or other: the label of the request metrics."""
        return self.kind if self.kind in ("command", "event", "action") else "other"
