"""The run lifecycle: start, show, tail, stop, resume and compare runs, and each run's card and thread."""

from bot.runs.control import INLINE_LOG_BYTES, TERMINAL
from bot.runs.errors import Reply, RunError
from bot.runs.evals import contract_differences, primary_metric
from bot.runs.lookup import find_run
from bot.runs.resume import checkpoint_steps, copy_from_checkpoint, inherited_fields, resume_diff, resume_patch
from bot.runs.service import RunService
from bot.runs.submit import run_name_for
from bot.runs.thread import TRANSITION_EVENT, RunThread, transition_metadata

__all__ = [
    "INLINE_LOG_BYTES",
    "TERMINAL",
    "TRANSITION_EVENT",
    "Reply",
    "RunError",
    "RunService",
    "RunThread",
    "checkpoint_steps",
    "contract_differences",
    "copy_from_checkpoint",
    "find_run",
    "inherited_fields",
    "primary_metric",
    "resume_diff",
    "resume_patch",
    "run_name_for",
    "transition_metadata",
]
