"""The release webhook's sender, on a real database (SQLite and PostgreSQL) and httpx's mock transport: signed,
in order, each event once, retried with backoff while the receiver is down, trouble told once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from bot.release.webhook import MAX_ATTEMPTS, ReleaseWebhook, backoff, encode, sign, verify
from storage import repos
from storage.db import SessionFactory

SECRET = "whsec-unit-0123456789"
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


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


def sender(sessions: SessionFactory, receiver: Receiver, clock: Clock, told: list[Any]) -> ReleaseWebhook:
    return ReleaseWebhook(
        url="https://deploy.example.com/hooks/finetune",
        secret=SECRET,
        sessions=sessions,
        clock=clock,
        secrets=[SECRET],
        on_trouble=lambda payload, reason, given_up: told.append((payload["id"], reason, given_up)),
        transport=httpx.MockTransport(receiver),
    )


def test_signature_is_hmac_sha256_of_the_exact_body() -> None:
    body = encode({"b": 1, "a": "x"})
    assert body == b'{"a":"x","b":1}'
    signature = sign(SECRET, body)
    assert signature.startswith("sha256=") and len(signature) == 7 + 64
    assert verify(SECRET, body, signature)
    assert not verify(SECRET, body + b" ", signature) and not verify("other", body, signature)


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
        assert verify(SECRET, request.content, request.headers["X-Finetune-Signature"])
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
