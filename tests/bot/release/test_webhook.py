"""The release webhook's sender, on a real database (SQLite and PostgreSQL), with httpx's mock transport and with
a local HTTP receiver: signed with a timestamp at each attempt, in order, each event once, retried with backoff
while the receiver is down, trouble told once; the receiver's check (`verify`, shown in the operator guide)
refuses replays, tampered bodies and malformed headers, and the secret is in no log."""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.release.webhook import (
    MAX_ATTEMPTS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    ReleaseWebhook,
    backoff,
    encode,
    sign,
    verify,
)
from storage import repos
from storage.db import SessionFactory
from tests.fixtures.webhook import WebhookReceiver

SECRET = "whsec-unit-0123456789"
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
OPERATOR_GUIDE = Path(__file__).resolve().parents[3] / "docs" / "operator-guide.md"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Receiver:
    """Answers `status` (or raises a connection error while `up` is False) and records what it got."""

    def __init__(self) -> None:
        self.up = False
        self.got: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("connection refused", request=request)
        self.got.append(request)
        return httpx.Response(200)


def queue(sessions: SessionFactory, count: int) -> list[str]:
    """`count` stage changes with their events, as the ledger writes them."""
    ids = []
    with sessions() as s:
        run = repos.create_run(
            s,
            name="sft-tiny-x",
            recipe_name="sft-tiny",
            recipe_hash="sha256:" + "a" * 64,
            requester="U1",
            channel="C1",
        )
        registration = repos.create_registration(s, model="m", version="v1", run_id=run.id, polyaxon_version="m-v1")
        for n in range(count):
            change = repos.add_stage_change(
                s,
                model="m",
                version="v1",
                registration_id=registration.id,
                from_stage="testing",
                to_stage="staging",
                kind="promote",
                actor="U1",
                reason=f"change {n}",
            )
            event_id = f"evt-{n}"
            repos.add_release_event(
                s, event_id=event_id, stage_change_id=change.id, payload={"id": event_id, "n": n}, next_attempt_at=T0
            )
            ids.append(event_id)
        s.commit()
    return ids


def sender(
    sessions: SessionFactory,
    receiver: Receiver | None,
    clock: Clock,
    told: list[Any],
    url: str = "https://deploy.example.com/hooks/finetune",
) -> ReleaseWebhook:
    return ReleaseWebhook(
        url=url,
        secret=SECRET,
        sessions=sessions,
        clock=clock,
        secrets=[SECRET],
        on_trouble=lambda payload, reason, given_up: told.append((payload["id"], reason, given_up)),
        transport=httpx.MockTransport(receiver) if receiver is not None else None,
    )


def signed(request: httpx.Request, now: datetime) -> bool:
    """What a receiver whose clock reads `now` makes of a request the bot sent."""
    return verify(
        SECRET,
        timestamp=request.headers.get(TIMESTAMP_HEADER),
        signature=request.headers.get(SIGNATURE_HEADER),
        body=request.content,
        now=now.timestamp(),
    )


def test_signature_is_slacks_v0_over_the_timestamp_and_the_exact_body() -> None:
    body = encode({"b": 1, "a": "x"})
    assert body == b'{"a":"x","b":1}'
    now = 1_796_000_000
    signature = sign(SECRET, str(now), body)
    # The same base string and HMAC as Slack's own request signing (slack_sdk's SignatureVerifier).
    from slack_sdk.signature import SignatureVerifier

    assert signature == SignatureVerifier(SECRET).generate_signature(timestamp=str(now), body=body)
    assert signature.startswith("v0=") and len(signature) == 3 + 64
    assert verify(SECRET, timestamp=str(now), signature=signature, body=body, now=now + 299)
    assert verify(SECRET, timestamp=str(now), signature=signature, body=body, now=now - 299), "a clock a bit behind"


@pytest.mark.parametrize(
    ("timestamp", "signature", "body", "now_offset"),
    [
        ("1796000000", None, b'{"a":"x","b":1}', 0),
        (None, "SIG", b'{"a":"x","b":1}', 0),
        ("1796000000", "SIG", b'{"a":"x","b":1}', 301),
        ("1796000000", "SIG", b'{"a":"x","b":1}', -301),
        ("1796000000", "SIG", b'{"a":"x","b":2}', 0),
        ("1796000001", "SIG", b'{"a":"x","b":1}', 0),
        ("1796000000", "OTHER_SECRET", b'{"a":"x","b":1}', 0),
        ("1796000000", "BODY_ONLY", b'{"a":"x","b":1}', 0),
        ("+1796000000", "SIG", b'{"a":"x","b":1}', 0),
        ("1796_000_000", "SIG", b'{"a":"x","b":1}', 0),
        ("١٧٩٦٠٠٠٠٠٠", "SIG", b'{"a":"x","b":1}', 0),
        ("9" * 5000, "SIG", b'{"a":"x","b":1}', 0),
        ("1796000000", "v0=é", b'{"a":"x","b":1}', 0),
    ],
    ids=[
        "no-signature",
        "no-timestamp",
        "replayed-after-5-min",
        "from-the-future",
        "tampered-body",
        "timestamp-changed",
        "another-secret",
        "old-body-only-signature",
        "signed-number",
        "underscores",
        "non-ascii-digits",
        "huge-number",
        "non-ascii-signature",
    ],
)
def test_the_receiver_refuses(timestamp: str | None, signature: str | None, body: bytes, now_offset: int) -> None:
    """A request the bot signed at 1796000000 over `{"a":"x","b":1}`, with one thing wrong: refused, no exception."""
    genuine = sign(SECRET, "1796000000", b'{"a":"x","b":1}')
    forged = {
        "SIG": genuine,
        "OTHER_SECRET": sign("whsec-other", "1796000000", b'{"a":"x","b":1}'),
        # What the bot sent before the timestamp: valid for ever, so a receiver must no longer take it.
        "BODY_ONLY": "sha256=" + hmac.new(SECRET.encode(), b'{"a":"x","b":1}', hashlib.sha256).hexdigest(),
    }
    shown = forged.get(signature, signature) if signature is not None else None
    assert not verify(SECRET, timestamp=timestamp, signature=shown, body=body, now=1_796_000_000 + now_offset)


def test_the_operator_guide_shows_the_verifier_as_it_is() -> None:
    """A receiver copies these from the guide: they must be the functions the bot's tests hold to the sender."""
    guide = OPERATOR_GUIDE.read_text()
    for function in (sign, verify):
        assert inspect.getsource(function) in guide, f"docs/operator-guide.md must show {function.__name__} as is"


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff(n).total_seconds() for n in (1, 2, 3, 4)] == [2, 4, 8, 16]
    assert backoff(30).total_seconds() == 600 and backoff(30, max_s=5).total_seconds() == 5


def test_down_then_up_delivers_each_event_once_in_order_and_tells_the_trouble_once(sessions: SessionFactory) -> None:
    ids = queue(sessions, 3)
    receiver, clock, told = Receiver(), Clock(), []
    hook = sender(sessions, receiver, clock, told)
    first = hook.deliver_due()
    assert (first.delivered, first.failed) == (0, 1)
    assert len(told) == 1 and told[0][0] == "evt-0" and "ConnectError" in told[0][1] and told[0][2] is False
    # Not due yet: nothing is attempted, and nothing behind the head overtakes it.
    clock.now += timedelta(seconds=1)
    assert hook.deliver_due().failed == 0
    clock.now += timedelta(seconds=2)
    assert hook.deliver_due().failed == 1
    assert len(told) == 1, "the trouble is told once, not per attempt"
    with sessions() as s:
        head = repos.list_release_events(s)[0]
    assert head.attempts == 2 and head.next_attempt_at == clock.now + timedelta(seconds=4)
    assert SECRET not in (head.last_error or "")

    receiver.up = True
    clock.now += timedelta(seconds=5)
    done = hook.deliver_due()
    assert (done.delivered, done.failed) == (3, 0)
    assert [r.headers["Idempotency-Key"] for r in receiver.got] == ids
    for request in receiver.got:
        assert signed(request, clock.now)
        assert request.headers[TIMESTAMP_HEADER] == str(int(clock.now.timestamp()))
        assert request.headers["X-Finetune-Event"] == "model.stage_changed"
        assert json.loads(request.content)["id"] == request.headers["Idempotency-Key"]
    assert hook.deliver_due().delivered == 0, "delivered events are never sent again"
    with sessions() as s:
        assert {e.status for e in repos.list_release_events(s)} == {"delivered"}


def test_an_event_is_given_up_after_its_attempts_and_said_so(sessions: SessionFactory) -> None:
    queue(sessions, 1)
    receiver, clock, told = Receiver(), Clock(), []
    hook = sender(sessions, receiver, clock, told)
    hook.max_retry_s = 1
    for _ in range(MAX_ATTEMPTS):
        hook.deliver_due()
        clock.now += timedelta(seconds=2)
    with sessions() as s:
        event = repos.list_release_events(s)[0]
    assert event.status == "failed" and event.attempts == MAX_ATTEMPTS
    assert [given_up for _, _, given_up in told] == [False, True]


def test_without_a_url_events_are_kept_and_nothing_is_sent(sessions: SessionFactory) -> None:
    queue(sessions, 1)
    hook = ReleaseWebhook(url=None, secret=None, sessions=sessions, clock=Clock(), secrets=[])
    assert not hook.enabled and hook.deliver_due().delivered == 0
    with sessions() as s:
        assert [e.status for e in repos.list_release_events(s)] == ["pending"]


def replay(url: str, headers: dict[str, str], body: bytes) -> int:
    """POST a request as captured (its signing headers, key and event) with `body`: the receiver's status."""
    kept = ("Content-Type", "X-Finetune-Event", "Idempotency-Key", TIMESTAMP_HEADER, SIGNATURE_HEADER)
    captured = httpx.Headers(headers)
    return httpx.post(url, content=body, headers={h: captured[h] for h in kept if h in captured}).status_code


def test_a_local_receiver_takes_each_attempt_signed_anew_and_refuses_replays_and_tampering(
    sessions: SessionFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The real sender over HTTP to a local receiver that checks as the guide says (`verify`, then the key once)."""
    caplog.set_level(logging.DEBUG)
    queue(sessions, 1)
    clock, told = Clock(), []
    receiver = WebhookReceiver(SECRET, now=lambda: clock.now.timestamp())
    try:
        hook = sender(sessions, None, clock, told, url=receiver.url)
        receiver.refuse = 1  # the receiver is in trouble once: the bot retries the event
        assert hook.deliver_due().failed == 1
        assert told and "HTTP 503" in told[0][1]
        clock.now += timedelta(minutes=6)  # past the first signature's 5 minutes
        assert hook.deliver_due().delivered == 1
        hook.close()

        (first_headers, first_body), (second_headers, second_body) = receiver.arrivals
        first, second = httpx.Headers(first_headers), httpx.Headers(second_headers)
        assert first_body == second_body and json.loads(second_body)["id"] == "evt-0"
        assert first["Idempotency-Key"] == second["Idempotency-Key"] == "evt-0"
        assert (first[TIMESTAMP_HEADER], second[TIMESTAMP_HEADER]) == (
            str(int(T0.timestamp())),
            str(int(clock.now.timestamp())),
        ), "each attempt is signed with its own timestamp"
        assert first[SIGNATURE_HEADER] != second[SIGNATURE_HEADER]
        assert [valid for _, _, valid in receiver.deliveries] == [True, True] and receiver.acted == ["evt-0"]

        # A replay of the first attempt, now 6 minutes old: refused without a look at the body.
        assert replay(receiver.url, first_headers, first_body) == 401
        # The second one replayed within its 5 minutes: verified, and its key was acted on already.
        assert replay(receiver.url, second_headers, second_body) == 200
        assert receiver.acted == ["evt-0"]
        # The same signed headers over a body changed by one byte: refused.
        tampered = second_body.replace(b'"n":0', b'"n":1')
        assert tampered != second_body
        assert replay(receiver.url, second_headers, tampered) == 401
        # A request signed the old way (the body alone, no timestamp): refused.
        old = httpx.Headers(second_headers)
        old[SIGNATURE_HEADER] = "sha256=" + hmac.new(SECRET.encode(), second_body, hashlib.sha256).hexdigest()
        del old[TIMESTAMP_HEADER]
        assert replay(receiver.url, dict(old), second_body) == 401
        assert [valid for _, _, valid in receiver.deliveries] == [True, True, False, True, False, False]
    finally:
        receiver.down()
    with sessions() as s:
        event = repos.list_release_events(s)[0]
    assert event.status == "delivered" and event.attempts == 2
    assert caplog.records, "the sender logs its attempts"
    assert SECRET not in caplog.text and SECRET not in (event.last_error or "")
