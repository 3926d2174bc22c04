"""A request's one log line (`bot.web.log_answer`): refusals at WARNING, answered requests at INFO only with
FINETUNE_ACCESS_LOG, else DEBUG; over HTTP and Socket Mode alike."""

from __future__ import annotations

import logging

import pytest
from slack_bolt.response import BoltResponse

from bot.frontdoor import Answer
from bot.frontdoor.verdict import Refused
from bot.web import log_answer


def _levels(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "finetune_bot.web"]


def test_an_answered_request_is_an_info_line_only_with_the_access_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="finetune_bot.web")
    answered = Answer(status=200, kind="command", bolt=BoltResponse(status=200, body=""))
    log_answer(answered, 0.0031, access_log=True)
    log_answer(answered, 0.0042, access_log=False)
    log_answer(answered, 0.0012, access_log=True, via=" (socket mode)")
    assert _levels(caplog) == [
        (logging.INFO, "slack command answered 200 in 3.1 ms"),
        (logging.DEBUG, "slack command answered 200 in 4.2 ms"),
        (logging.INFO, "slack command (socket mode) answered 200 in 1.2 ms"),
    ]


def test_a_refusal_is_a_warning_with_its_reason_whatever_the_setting(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="finetune_bot.web")
    refused = Answer(
        status=401, kind="command", refused=Refused(401, "bad_timestamp", "timestamp not an integer"), length=425
    )
    log_answer(refused, 0.0002, access_log=False)
    assert _levels(caplog) == [
        (logging.WARNING, "slack command answered 401 in 0.2 ms: refused, timestamp not an integer (425 bytes)")
    ]


def test_an_answer_bolt_did_not_give_as_success_is_an_info_line_whatever_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="finetune_bot.web")
    log_answer(Answer(status=404, kind="action", bolt=BoltResponse(status=404, body="")), 0.002, access_log=False)
    assert _levels(caplog) == [(logging.INFO, "slack action answered 404 in 2.0 ms")]


def test_at_info_without_the_access_log_an_answered_request_costs_no_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="finetune_bot.web")
    log_answer(Answer(status=200, kind="event", bolt=BoltResponse(status=200, body="")), 0.001, access_log=False)
    assert _levels(caplog) == []
