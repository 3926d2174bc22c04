"""`sweep`: a recipe's training keys searched over a space of values, as one Polyaxon matrix.

`KEY=V1,V2,…` (or `KEY=choice(V1,V2,…)`) lists values; `KEY=uniform(a,b)` and `KEY=loguniform(a,b)` are
ranges a random search samples. A key with one value is a fixed override, as in `run`. The grammar checks
the shape (how many trials, which mode can enumerate what); which keys a recipe may sweep, and each value's
type and bounds, are the catalog's (`Catalog.plan_sweep`).
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.grammar.lexing import _FLOAT_RE, _INT_RE, CommandError, Scalar, _flags, _key_values, parse_scalar
from bot.grammar.run import RecipeCommand, check_training_key, recipe_fields

USAGE = (
    "sweep recipe=NAME [preset=P,…] KEY=V1,V2,… [KEY=uniform(a,b)|loguniform(a,b)|choice(a,b,…)] "
    "[mode=grid|random] [trials=N] [concurrency=K] [sampler_seed=S] [KEY=VALUE …] [--dry-run]"
)
MAX_TRIALS = 100
MAX_VALUES = 100
MAX_CONCURRENCY = 20
DEFAULT_CONCURRENCY = 4
# The sweep's own options; every other key is a training key of the recipe.
OPTIONS = ("mode", "trials", "concurrency", "sampler_seed")

# How many whole numbers a range may hold for its refusal to list them all (`epochs=1,2,3,4,5`).
MAX_LISTED = 10
NEEDS_TRIALS = "a random sweep needs trials=N (how many points to sample), e.g. trials=8"

_DIST_RE = re.compile(r"^(?P<kind>uniform|loguniform|choice)\((?P<args>.*)\)$", re.IGNORECASE)


class SweepAxis(BaseModel):
    """One swept key: listed values (`choice`), or a range a random search samples (`uniform`, `loguniform`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["choice", "uniform", "loguniform"]
    values: list[Scalar] = []
    low: float | None = None
    high: float | None = None
    # Each value's text as typed (an int key refuses `1e3` and quotes it).
    texts: list[str] = []

    @property
    def continuous(self) -> bool:
        """A range to sample from, which a grid cannot enumerate."""
        return self.kind != "choice"

    def describe(self) -> str:
        """The axis as a user would type it."""
        if self.kind == "choice":
            return ",".join(self.texts or [str(v) for v in self.values])
        return f"{self.kind}({self.low:g},{self.high:g})"


class SweepCommand(RecipeCommand):
    """`sweep recipe=NAME … KEY=V1,V2,… [mode=grid|random] [trials=N] [concurrency=K] [--dry-run]`."""

    name: Literal["sweep"] = "sweep"
    space: dict[str, SweepAxis]
    mode: Literal["grid", "random"] = "grid"
    # The number of trials: a random search's sample size, or a cap on a grid (its first N combinations).
    trials: int | None  # None: a random sweep over a range of whole numbers whose key's type the catalog judges
    concurrency: int
    # The random search's seed: the same command samples the same trials (derived from the command when unset).
    sampler_seed: int | None = None
    dry_run: bool = False

    @property
    def grid_size(self) -> int:
        """How many combinations the listed values make (a grid's size before any cap)."""
        return grid_size(self.space)


def grid_size(space: dict[str, SweepAxis]) -> int:
    """How many combinations the listed values of a space make."""
    return math.prod(len(axis.values) for axis in space.values() if axis.kind == "choice")


def _parse_sweep(tokens: list[str]) -> SweepCommand:
    positional, pairs = _key_values(tokens, "sweep")
    words, flags = _flags(positional, ("--dry-run",), "sweep")
    if words:
        raise CommandError(f"{words[0]!r} is not KEY=VALUE; usage: {USAGE}")
    options = {key: pairs.pop(key) for key in OPTIONS if key in pairs}
    space: dict[str, SweepAxis] = {}
    for key, value in list(pairs.items()):
        if key in ("recipe", "preset", "presets"):
            continue
        axis = parse_axis(key, value)
        if axis is not None:
            check_training_key(key, value)
            space[key] = axis
            del pairs[key]
    fields = recipe_fields(pairs, "sweep", USAGE)
    if not space:
        raise CommandError(
            "`sweep` needs at least one key with several values, e.g. lr=1e-3,3e-3,1e-2 or "
            f"lr=loguniform(1e-4,1e-2) with mode=random trials=8; usage: {USAGE}"
        )
    continuous = sorted(key for key, axis in space.items() if axis.continuous)
    mode = options.get("mode", "random" if continuous else "grid").lower()
    if mode not in ("grid", "random"):
        raise CommandError(f"mode={options['mode']!r}: expected grid or random")
    trials = _bounded_int("trials", options["trials"], 1, MAX_TRIALS) if "trials" in options else None
    notes = list(fields.pop("notes"))
    if mode == "grid":
        if continuous:
            raise CommandError(
                f"{continuous[0]}={space[continuous[0]].describe()} is a range, which a grid cannot enumerate: "
                f"list values ({continuous[0]}=V1,V2,…) or sample it with mode=random trials=N"
            )
        size = grid_size(space)
        if trials is None:
            if size > MAX_TRIALS:
                shape = " × ".join(str(len(axis.values)) for axis in space.values())
                raise CommandError(
                    f"this grid has {size} trials ({shape}), over the limit of {MAX_TRIALS}: list fewer values, "
                    f"or cap it with trials=N (its first N combinations), or sample it with mode=random trials=N"
                )
            trials = size
        elif trials > size:
            notes.append(f"trials={trials} is more than the grid's {size} combinations: the sweep runs {size}")
            trials = size
    elif trials is None and not any(whole_range(axis) for axis in space.values()):
        raise CommandError(NEEDS_TRIALS)
    # A range between whole numbers (`epochs=uniform(1,5)`) without trials=N is left to the catalog, which knows
    # whether the key takes whole numbers: that problem is told first, then the missing trials=N (plan_sweep).
    concurrency = DEFAULT_CONCURRENCY
    if "concurrency" in options:
        concurrency = _bounded_int("concurrency", options["concurrency"], 1, MAX_CONCURRENCY)
    if trials is not None and concurrency > trials:
        concurrency = trials
    seed = _bounded_int("sampler_seed", options["sampler_seed"], 0, 2**31 - 1) if "sampler_seed" in options else None
    if seed is not None and mode == "grid":
        raise CommandError("sampler_seed= seeds a random search; a grid has nothing to sample (drop it)")
    return SweepCommand(
        **fields,
        notes=notes,
        space=space,
        mode=mode,
        trials=trials,
        concurrency=concurrency,
        sampler_seed=seed,
        dry_run="--dry-run" in flags,
    )


def whole_range(axis: SweepAxis) -> bool:
    """Whether the axis is a range between whole numbers (`uniform(1,5)`): real numbers, unless the key refuses them."""
    return (
        axis.continuous
        and axis.low is not None
        and axis.high is not None
        and axis.low.is_integer()
        and (axis.high.is_integer())
    )


def whole_values(axis: SweepAxis) -> str:
    """The whole numbers a range between whole numbers could list instead: all of a few, else its ends and middle."""
    assert axis.low is not None and axis.high is not None
    low, high = int(axis.low), int(axis.high)
    whole = range(low, high + 1) if high - low < MAX_LISTED else (low, (low + high) // 2, high)
    return ",".join(str(n) for n in whole)


def parse_axis(key: str, value: str) -> SweepAxis | None:
    """The axis `KEY=value` sweeps, or None when the value is one plain value (a fixed override)."""
    match = _DIST_RE.match(value)
    if match is None and "," not in value:
        return None
    if match is not None:
        kind = match.group("kind").lower()
        args = [arg.strip() for arg in match.group("args").split(",")]
    else:
        kind, args = "choice", [arg.strip() for arg in value.split(",")]
    if any(not arg for arg in args):
        raise CommandError(f"{key}={value}: an empty value in the list; write {key}=V1,V2,… with no empty entries")
    if kind == "choice":
        return _choice(key, value, args)
    if len(args) != 2:
        raise CommandError(f"{key}={value}: {kind} takes two numbers, {kind}(low,high)")
    low, high = (_number(key, kind, arg) for arg in args)
    if not low < high:
        raise CommandError(f"{key}={value}: the low end must be below the high end")
    if kind == "loguniform" and low <= 0:
        raise CommandError(f"{key}={value}: loguniform samples on a log scale, so both ends must be above 0")
    return SweepAxis(kind=kind, low=low, high=high)


def _choice(key: str, value: str, args: list[str]) -> SweepAxis:
    if len(args) < 2:
        raise CommandError(f"{key}={value}: a swept key needs at least two values (one value is a fixed override)")
    if len(args) > MAX_VALUES:
        raise CommandError(f"{key}: {len(args)} values, at most {MAX_VALUES}")
    values: list[Scalar] = []
    for arg in args:
        try:
            typed = parse_scalar(arg)
        except CommandError as exc:
            raise CommandError(f"{key}: {exc.message}") from None
        if typed in values and type(typed) is type(values[values.index(typed)]):
            raise CommandError(f"{key}={value}: {arg} is listed twice")
        values.append(typed)
    return SweepAxis(kind="choice", values=values, texts=args)


def _number(key: str, kind: str, arg: str) -> float:
    if not _FLOAT_RE.match(arg):
        raise CommandError(f"{key}: {kind}({arg}, …) takes numbers, not {arg!r}")
    value = float(arg)
    if not math.isfinite(value):
        raise CommandError(f"{key}: {arg} is not a finite number")
    return value


def _bounded_int(key: str, raw: str, low: int, high: int) -> int:
    if not _INT_RE.match(raw):
        raise CommandError(f"{key}={raw!r}: expected a whole number {low}..{high}")
    value = int(raw)
    if not low <= value <= high:
        raise CommandError(f"{key}={value} is out of bounds: {low}..{high}")
    return value
