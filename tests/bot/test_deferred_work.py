"""Work that follows an ack waits for the acks still pending (at most `max_yield_s`), behind one gatekeeper."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from bot.services import AckGate, DeferredWork


def recorder(started: list[float]) -> Any:
    def work() -> None:
        started.append(time.monotonic())

    return work


def test_work_waits_until_the_pending_acks_are_out_and_quiet() -> None:
    gate = AckGate(max_yield_s=5.0, settle_s=0.05)
    work = DeferredWork(gate)
    started: list[float] = []
    gate.enter()
    try:
        futures = [work.submit({}, recorder(started)) for _ in range(40)]
        time.sleep(0.2)
        assert started == [] and work.in_flight == 40  # an ack is still pending: nothing ran
        left = time.monotonic()
        gate.leave()
        for future in futures:
            future.result(timeout=5)
    finally:
        work.shutdown()
    assert len(started) == 40
    assert min(started) - left >= 0.05  # and the gate stayed quiet for settle_s first
    assert work.in_flight == 0


def test_work_runs_after_max_yield_even_while_acks_keep_coming() -> None:
    gate = AckGate(max_yield_s=0.3, settle_s=0.05)
    work = DeferredWork(gate)
    started: list[float] = []
    gate.enter()  # never leaves: a steady stream of deliveries
    try:
        submitted = time.monotonic()
        work.submit({}, recorder(started)).result(timeout=5)
    finally:
        work.shutdown()
    assert 0.3 <= started[0] - submitted < 3


def test_a_failure_goes_to_on_error_and_every_delivery_is_marked_done() -> None:
    errors: list[tuple[str, dict[str, Any]]] = []
    done: list[dict[str, Any]] = []
    work = DeferredWork(AckGate(settle_s=0.0), on_error=lambda exc, body: errors.append((str(exc), body)))
    work.on_done = done.append

    def fail() -> None:
        raise RuntimeError("boom")

    try:
        work.submit({"n": 1}, fail).result(timeout=5)
        work.submit({"n": 2}, lambda: None).result(timeout=5)
    finally:
        work.shutdown()
    assert errors == [("boom", {"n": 1})] and done == [{"n": 1}, {"n": 2}]


def test_without_an_error_handler_the_future_carries_the_error() -> None:
    work = DeferredWork(AckGate(settle_s=0.0))
    try:
        future = work.submit({}, lambda: 1 / 0 and None)
        with pytest.raises(ZeroDivisionError):
            future.result(timeout=5)
    finally:
        work.shutdown()
    assert work.in_flight == 0


def test_shutdown_finishes_the_work_still_waiting_for_the_gate() -> None:
    gate = AckGate(max_yield_s=0.2, settle_s=0.0)
    work = DeferredWork(gate)
    ran = threading.Event()
    gate.enter()
    work.submit({}, ran.set)
    work.shutdown(wait=True)
    assert ran.is_set() and work.in_flight == 0


def test_work_submitted_after_shutdown_is_refused_and_a_second_shutdown_is_harmless() -> None:
    work = DeferredWork(AckGate(settle_s=0.0))
    work.submit({}, lambda: None).result(timeout=5)
    work.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        work.submit({}, lambda: None)
    work.shutdown()
    assert work.in_flight == 0
