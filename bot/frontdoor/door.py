"""The front door: every Slack delivery, over HTTP or Socket Mode, is screened here before Bolt sees it.

Over HTTP the body is bounded before it is read, then content type, Slack's signature and the payload's
shape are checked; over Socket Mode (the websocket is Slack's, authenticated by the app token) only the
shape. A request that fails gets a 4xx and one log line from the caller, and nothing in it is used. A
delivery that passes reaches `FrontDoor.dispatch`, the one way into Bolt.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import IO, TYPE_CHECKING, Any

from slack_bolt import App
from slack_bolt.adapter.wsgi.http_response import WsgiHttpResponse
from slack_bolt.request import BoltRequest
from slack_bolt.response import BoltResponse

from bot.frontdoor.payloads import FORM, JSON, media_type, parse_socket_payload
from bot.frontdoor.screen import MAX_BODY_BYTES, check_length, screen_http
from bot.frontdoor.verdict import Delivery, Refused
from bot.services import Services

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

# Set in the context of every request the front door hands Bolt: the error handler trusts such a body's response_url.
ADMITTED = "finetune_admitted"
SOCKET_KINDS = {"slash_commands": "command", "events_api": "event", "interactive": "action"}
# Loggers of libraries that write a request body below WARNING (Bolt's signature check logs the whole body at
# INFO when it refuses one); the front door refuses such requests first, and these stay quiet if one gets past.
BODY_LOGGERS = ("slack_bolt.RequestVerification",)


@dataclass
class Answer:
    """What the front door answered one request: the status, the metric kind, Bolt's response or the refusal."""

    status: int
    kind: str
    bolt: BoltResponse | None = None
    refused: Refused | None = None
    length: int | None = None  # bytes of an HTTP body (declared, when refused before reading it)

    def wsgi(self) -> tuple[str, list[tuple[str, str]], list[bytes]]:
        """(status line, headers, body) for a WSGI start_response."""
        if self.bolt is not None:
            response = WsgiHttpResponse(status=self.bolt.status, headers=self.bolt.headers, body=self.bolt.body)
            return response.status, response.get_headers(), list(response.get_body())
        assert self.refused is not None
        # A 401 says no more than Bolt's did; other refusals say what to fix (the text is the door's own).
        text = "invalid request\n" if self.status == 401 else f"{self.refused.detail}\n"
        body = text.encode()
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        return f"{self.status} {HTTPStatus(self.status).phrase}", headers, [body]

    def log_suffix(self) -> str:
        """The refusal's part of the request's one log line: reason and size, never the request's content."""
        if self.refused is None:
            return ""
        size = f" ({self.length} bytes)" if self.length is not None else ""
        return f": refused, {self.refused.detail}{size}"


class FrontDoor:
    """Screens deliveries and dispatches the ones that pass to the Bolt app."""

    def __init__(
        self,
        app: App,
        services: Services,
        *,
        signing_secret: str | None,
        max_body: int = MAX_BODY_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.services = services
        # Without a signing secret (Socket Mode) a random one fails every HTTP request closed.
        self.secret = (signing_secret or secrets.token_hex(32)).encode()
        self.max_body = max_body
        self.clock = clock
        quiet_body_loggers()

    def answer_http(self, environ: WSGIEnvironment) -> Answer:
        """Screen one `POST /slack/events` and dispatch it if it passes; never raises for what a client sends."""
        kind = "other"
        length = 0
        try:
            declared = check_length(environ.get("CONTENT_LENGTH"), self.max_body)
            raw = read_body(environ["wsgi.input"], declared, self.max_body)
            length = len(raw)
            kind = sniff_kind(raw, environ.get("CONTENT_TYPE"))
            delivery = screen_http(
                content_type=environ.get("CONTENT_TYPE"),
                timestamp=environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP"),
                signature=environ.get("HTTP_X_SLACK_SIGNATURE"),
                body=raw,
                secret=self.secret,
                now=self.clock(),
            )
            response = self.dispatch(delivery)
        except Refused as refusal:
            return self._refuse(refusal, kind, length or _declared(environ))
        return Answer(status=response.status, kind=delivery.metric_kind, bolt=response, length=length)

    def answer_socket(self, envelope_type: str, payload: object) -> Answer:
        """Screen one Socket Mode request's payload and dispatch it if it passes."""
        kind = SOCKET_KINDS.get(envelope_type, "other")
        try:
            delivery = parse_socket_payload(envelope_type, payload)
            response = self.dispatch(delivery)
        except Refused as refusal:
            return self._refuse(refusal, kind, None)
        return Answer(status=response.status, kind=kind, bolt=response)

    def dispatch(self, delivery: Delivery) -> BoltResponse:
        """The one way into Bolt: a delivery Slack sent (signature checked, or its websocket) of a shape Slack sends.

        It is recorded in the delivery ledger before Bolt acks it: a retry of a delivery recorded already is
        acked and does nothing more, and one a dead process acked is carried out by another (`handlers.deliveries`).
        """
        request = bolt_request(delivery)
        ledger = self.services.ledger
        if ledger is not None and not ledger.admit(delivery.body):
            self.services.metrics.duplicates.labels(kind=delivery.metric_kind).inc()
            return BoltResponse(status=200, body="")
        response = self.app.dispatch(request)
        if response.status >= 400 and ledger is not None:
            # No listener took it (Bolt answered 404): it was never the bot's delivery, and nothing is left to do.
            ledger.forget(delivery.body)
        return response

    def _refuse(self, refusal: Refused, kind: str, length: int | None) -> Answer:
        self.services.metrics.refused.labels(reason=refusal.reason).inc()
        return Answer(status=refusal.status, kind=kind, refused=refusal, length=length)


def bolt_request(delivery: Delivery) -> BoltRequest:
    """Bolt's request for a delivery, parsed already: Bolt's `socket_mode` input (a parsed body, no signature to
    check), so Bolt never parses the bytes a second time and differently."""
    try:
        return BoltRequest(body=dict(delivery.body), mode="socket_mode", context={ADMITTED: True})
    except Exception:  # a shape the checks missed breaks Bolt's context building: the sender's to fix
        raise Refused(400, "malformed", "payload Bolt cannot read") from None


def read_body(stream: IO[bytes], declared: int | None, limit: int) -> bytes:
    """The body: `declared` bytes, or at most limit + 1 when no length was declared; raise Refused past `limit`."""
    raw = stream.read(declared if declared is not None else limit + 1)
    if len(raw) > limit:
        raise Refused(413, "too_large", f"body over {limit} bytes")
    if declared is not None and len(raw) != declared:
        raise Refused(400, "bad_length", "body shorter than its Content-Length")
    return raw


def sniff_kind(body: bytes, content_type: str | None) -> str:
    """command, event, action or other: a metric label guessed from the bytes before they are trusted (never logged
    with anything else of them)."""
    media = media_type(content_type)
    if media == JSON:
        return "event"
    if media != FORM:
        return "other"
    if body.startswith(b"payload=") or b"&payload=" in body:
        return "action"
    if body.startswith(b"command=") or b"&command=" in body:
        return "command"
    return "other"


def quiet_body_loggers() -> None:
    """Keep library loggers that write request bodies below WARNING from writing anything below WARNING."""
    for name in BODY_LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(f, _WarningsOnly) for f in target.filters):
            target.addFilter(_WarningsOnly())


class _WarningsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


def _declared(environ: WSGIEnvironment) -> int:
    value: Any = environ.get("CONTENT_LENGTH") or "0"
    return int(value) if str(value).isascii() and str(value).isdigit() else 0
