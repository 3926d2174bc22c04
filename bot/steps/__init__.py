"""Workflow Builder steps (Slack custom functions): `start_finetune_run` and `request_promotion`."""

from bot.steps.complete import StepCompletions
from bot.steps.inputs import REQUEST_PROMOTION, START_RUN, STEP_CALLBACKS, Execution, StepInputError, read_execution
from bot.steps.service import StepService

__all__ = [
    "REQUEST_PROMOTION",
    "START_RUN",
    "STEP_CALLBACKS",
    "Execution",
    "StepCompletions",
    "StepInputError",
    "StepService",
    "read_execution",
]
