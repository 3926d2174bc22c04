"""Accelerator-hours: estimated before a run, accounted after it, budgeted per channel.

accounting.py  a run's unit-hours from its recorded status times, clipped to a period (pure)
estimate.py    a plan's estimate: measured on a confirmed run of the same recipe and presets, or bounded (pure)
render.py      the usage table, the budget's state, the digest's line (pure)
service.py     `UsageService`: estimates, settling an ended run, `usage`, `budget`, the 80 % notice
"""

from bot.usage.estimate import Estimate
from bot.usage.service import BudgetVerdict, UsageService

__all__ = ["BudgetVerdict", "Estimate", "UsageService"]
