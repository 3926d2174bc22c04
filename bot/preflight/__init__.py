"""The distributed preflight: `/finetune preflight` validates a distributed recipe before its real run.

    report.py   the report as a thread post, and the reports of preflights that never wrote one (pure)
    service.py  starting a preflight (a run of kind `preflight`) and settling it when its run ends

What a preflight is compiled from is `bot.catalog.preflight`; the gate that asks for one is
`bot.catalog.gate` (decision) and `bot.runs.gate` (lookup); the job itself is `trainer.preflight`.
"""

from bot.preflight.service import PreflightService

__all__ = ["PreflightService"]
