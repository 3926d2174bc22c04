"""Retried writes to Polyaxon: the client's own error lines of a try that a later one made good are dropped; a
write whose every try failed is logged with the client's lines of its last try and one warning."""

from __future__ import annotations

import logging

import pytest

from trainer.writes import ATTEMPTS, CLIENT_LOGGER, transient, write

log = logging.getLogger("trainer.callbacks")


@pytest.fixture(autouse=True)
def client_logger_as_in_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Polyaxon's client logger as a job's process has it: enabled, propagating (another test of this process may
    have configured logging otherwise)."""
    client = logging.getLogger(CLIENT_LOGGER)
    monkeypatch.setattr(client, "disabled", False)
    monkeypatch.setattr(client, "propagate", True)
    monkeypatch.setattr(client, "level", logging.NOTSET)


class Answer(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"({status})")
        self.status = status


def flaky(statuses: list[int]) -> tuple[list[int], object]:
    """A call that answers each status in turn, logging as Polyaxon's client does before it raises; then lands."""
    calls: list[int] = []

    def call() -> None:
        calls.append(1)
        if statuses:
            status = statuses.pop(0)
            logging.getLogger(CLIENT_LOGGER).error("HTTP response status: %s", status)
            raise Answer(status)

    return calls, call


def test_a_write_retried_until_it_lands_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    calls, call = flaky([405, 503])
    with caplog.at_level(logging.DEBUG):
        assert write(call, "log_outputs", log, sleep=lambda _: None)  # type: ignore[arg-type]
    assert len(calls) == 3
    assert caplog.records == []


def test_a_write_that_never_lands_shows_its_last_try_and_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    calls, call = flaky([503] * ATTEMPTS)
    with caplog.at_level(logging.DEBUG):
        assert not write(call, "log_outputs", log, sleep=lambda _: None)  # type: ignore[arg-type]
    assert len(calls) == ATTEMPTS
    told = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert told == [
        (CLIENT_LOGGER, "ERROR", "HTTP response status: 503"),
        ("trainer.callbacks", "WARNING", f"polyaxon log_outputs failed after {ATTEMPTS} tries: (503)"),
    ]


def test_a_refusal_that_will_not_change_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    calls, call = flaky([400])
    with caplog.at_level(logging.DEBUG):
        assert not write(call, "log_outputs", log, sleep=lambda _: None)  # type: ignore[arg-type]
    assert len(calls) == 1
    assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING"]


@pytest.mark.parametrize(
    ("exc", "again"),
    [(Answer(405), True), (Answer(503), True), (Answer(400), False), (Answer(404), False),
     (ConnectionRefusedError(), True), (ValueError("bad"), False)],
)  # fmt: skip
def test_transient(exc: BaseException, again: bool) -> None:
    assert transient(exc) is again
