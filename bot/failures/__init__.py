"""When runs go wrong: why a run waits, why it failed (a class with evidence and a hint), retries within the
recipe's budget from the newest checkpoint, and who hears about it."""

from bot.failures.classify import TITLES, Failure, classify, exception_line
from bot.failures.cluster import Condition, informative, routine, routine_warning
from bot.failures.policy import RetryDecision, attempts_allowed, decide_retry
from bot.failures.service import FailureService, notify_channel
from bot.failures.waiting import WAITING, WaitingRuns, condition_key

__all__ = [
    "TITLES",
    "WAITING",
    "Condition",
    "Failure",
    "FailureService",
    "RetryDecision",
    "WaitingRuns",
    "attempts_allowed",
    "classify",
    "condition_key",
    "decide_retry",
    "exception_line",
    "informative",
    "notify_channel",
    "routine",
    "routine_warning",
]
