"""Estimating a run's accelerator-hours before it starts. Pure.

Work is the run's steps (`max_steps`), else its epochs. Seconds per unit of work are measured on the recipe's
newest confirmed run on the same presets (its time in running over its steps or epochs). Without one, the work
itself is costed: its tokens (steps × batch × gradient accumulation × data-parallel processes, or epochs × the
dataset's rows, each row the dataset's mean length, at most `max_length`) × (4 × parameters + 2 × trainable
parameters) FLOPs a token (forward and backward; 6 × parameters for a full fine-tune), over the presets' training
FLOP/s (an accelerator's peak × an assumed utilisation, or a core's measured rate: `pricing.yaml`). Only without
that either do the presets' `maxDuration` bound the run. The estimate says which it used. A sweep multiplies by
its trials.
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


@dataclass(frozen=True)
class Work:
    """What the FLOP model needs of a plan: the model's size and the training split's rows (when known)."""

    parameters: int | None = None
    trainable: int | None = None
    rows: int | None = None
    row_bytes: float | None = None


# A token of English is about 4 bytes of text (BPE tokenizers); a row's JSON holds its keys too: an upper bound.
BYTES_PER_TOKEN = 4.0
DEFAULT_MAX_LENGTH = 1024  # TRL's default max_length


def flop_seconds(cost: CostProfile, params: Mapping[str, Any], work: Work) -> tuple[float, str] | None:
    """Seconds the run's work takes at the presets' training FLOP/s, and how that was reckoned; None when the
    model's size, the work or the hardware's rate is not known."""
    if cost.flops_per_s is None or not work.parameters:
        return None
    units = work_units(params)
    if units is None:
        return None
    max_length = _number(params.get("max_length") or params.get("max_seq_length")) or DEFAULT_MAX_LENGTH
    per_row = max_length
    length = f"max_length {max_length:g}"
    if work.row_bytes:
        per_row = min(max_length, work.row_bytes / BYTES_PER_TOKEN)
        length = f"~{per_row:,.0f} tokens a row (its dataset's mean row, max_length {max_length:g})"
    processes = cost.count if cost.unit == "accelerator" else 1.0
    if units[0] == "steps":
        batch = _number(params.get("per_device_train_batch_size")) or 8.0
        accumulation = _number(params.get("gradient_accumulation_steps")) or 1.0
        rows = units[1] * batch * accumulation * processes
        what = f"{units[1]:g} steps × {batch:g} rows" + (
            f" × {accumulation:g} accumulated" if accumulation != 1 else ""
        )
        what += f" × {processes:g} processes" if processes != 1 else ""
    elif work.rows:
        rows = units[1] * work.rows
        what = f"{units[1]:g} epochs × {work.rows:,} rows"
    else:
        return None
    tokens = rows * per_row
    trainable = work.trainable or work.parameters
    flops = tokens * (4 * work.parameters + 2 * trainable)
    seconds = flops / (cost.flops_per_s * cost.count)
    held = f"{cost.count:g} {cost.unit}{'s' if cost.count != 1 else ''}"
    basis = (
        f"FLOP model: {what} × {length} = {tokens:,.0f} tokens × {flops / tokens / 1e6:,.1f} MFLOP a token "
        f"({work.parameters / 1e6:,.1f}M params, {trainable / 1e6:,.2f}M trainable) = {flops:.2g} FLOP over "
        f"{held} at {cost.flops_source}"
    )
    return seconds, basis


def estimate(
    cost: CostProfile,
    params: Mapping[str, Any],
    sample: Sample | None,
    *,
    presets: str,
    trials: int = 1,
    work: Work | None = None,
) -> Estimate | None:
    """The estimate, from a measured sample of the same recipe and presets, else the FLOP model of the work, else
    the presets' maxDuration."""
    modelled = flop_seconds(cost, params, work) if work is not None else None
    units = work_units(params)
    if sample is not None and units is not None and units[0] == sample.unit and sample.units > 0:
        wall = units[1] * sample.per_unit_s
        basis = (
            f"measured: {units[1]:g} {units[0]} × {sample.per_unit_s:.3g} s per {units[0][:-1]} on "
            f"`{sample.run_name}` (the newest confirmed run of this recipe on {presets})"
        )
        measured = True
    elif modelled is not None:
        wall, reckoned = modelled
        if cost.max_duration_s is not None and wall > cost.max_duration_s:
            wall = cost.max_duration_s  # the preset ends a run there: it holds no more
            reckoned += f", bounded by {cost.max_duration_source}"
        basis = f"{reckoned}; no confirmed run on {presets} measured yet"
        measured = False
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


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
