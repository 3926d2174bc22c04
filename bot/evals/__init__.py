"""`/finetune eval`: a finished model evaluated on a harness suite, as a run of kind `eval` in its thread.

    service.py  resolving what is evaluated (a run, or a registered version's run) and starting the run

What the run is compiled from is `bot.catalog.evalrun` (the suite's contract is `bot.catalog.harness`); the job is
`trainer.eval_run`. Its card and its final results go in the evaluated run's thread like any run's (the watcher),
`outputs` checks its results like a training run's, and registration and promotion criteria may cite them
(`bot.registry.evidence`).
"""

from bot.evals.service import EvalService

__all__ = ["EvalService"]
