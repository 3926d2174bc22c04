"""Estimating a run's accelerator-hours before it starts. Pure.

Work is the run's steps (`max_steps`), else its epochs. Seconds per unit of work are measured on the recipe's
newest confirmed run on the same presets (its time in running over its steps or epochs); without one, the
presets' `maxDuration` bounds the run, and the estimate says which it used. A sweep multiplies by its trials.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.catalog import CostProfile
from bot.slack.blocks import human_duration


def work_units(params: Mapping[str, Any]) -> tuple[str, float] | None:
    """("steps", N) from `max_steps`, else ("epochs", N) from `num_train_epochs` or `epochs`; None without either."""
    steps = params.get("max_steps")
    if isinstance(steps, int | float) and not isinstance(steps, bool) and steps > 0:
        return "steps", float(steps)
    for key in ("num_train_epochs", "epochs"):
        epochs = params.get(key)
        if isinstance(epochs, int | float) and not isinstance(epochs, bool) and epochs > 0:
            return "epochs", float(epochs)
    return None


@dataclass(frozen=True)
class Sample:
    """A measured run: its name, its work and how long it ran."""

    run_name: str
    unit: str
    units: float
    running_s: float

    @property
    def per_unit_s(self) -> float:
        """Seconds of running per step (or epoch)."""
        return self.running_s / self.units


@dataclass(frozen=True)
class Estimate:
    """An estimate of a run's (or sweep's) unit-hours, its cost where priced, and what it rests on."""

    hours: float
    unit_hours: str  # accelerator-hours or core-hours
    wall_s: float
    basis: str
    measured: bool
    money: str | None = None
    trials: int = 1

    def line(self) -> str:
        """`≈ 0.42 accelerator-hours (1.01 USD) for 3 trials — measured: …`."""
        cost = f" ({self.money})" if self.money else ""
        trials = f" for {self.trials} trials" if self.trials > 1 else ""
        return f"≈ {_hours(self.hours)} {self.unit_hours}{cost}{trials} — {self.basis}"


def _hours(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def estimate(
    cost: CostProfile, params: Mapping[str, Any], sample: Sample | None, *, presets: str, trials: int = 1
) -> Estimate | None:
    """The estimate, from a measured sample of the same recipe and presets, else the presets' maxDuration."""
    work = work_units(params)
    if sample is not None and work is not None and work[0] == sample.unit and sample.units > 0:
        wall = work[1] * sample.per_unit_s
        basis = (
            f"measured: {work[1]:g} {work[0]} × {sample.per_unit_s:.3g} s per {work[0][:-1]} on `{sample.run_name}` "
            f"(the newest confirmed run of this recipe on {presets})"
        )
        measured = True
    elif cost.max_duration_s is not None:
        wall = cost.max_duration_s
        basis = (
            f"at most: {human_duration(wall)} ({cost.max_duration_source}); no confirmed run on {presets} to measure"
        )
        measured = False
    else:
        return None
    hours = wall * cost.count / 3600.0 * trials
    return Estimate(
        hours=hours,
        unit_hours=cost.unit_hours,
        wall_s=wall,
        basis=basis,
        measured=measured,
        money=cost.money(hours),
        trials=trials,
    )
