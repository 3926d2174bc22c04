"""The keys a user may override on the command line: a recipe's declared type and bounds, parsed.

A recipe declares each overridable key under `overrides:` (`OverrideDecl`); `parse_override_type`
reads the declared type (`float in (0, 1e-2]`, `int 1..20`, `bool`, `str`, `choice a|b`) into an
`OverrideSpec`, which checks and types a command-line value; `coerce_overrides` does that for a
whole `run` command, naming the keys the recipe allows when a key is not one of them.

An int key takes only a number written as an int: `seed=1e3` or `max_steps=100.0` is refused and
the message says what to write (`seed is an int: write 1000, not 1e3`); a float key takes an int.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from bot.catalog.errors import PlanError
from bot.grammar import (
    MAX_INT_DIGITS,
    PINNED_KEYS,
    Scalar,
    closest,
    did_you_mean,
    int_written_as_float,
    is_plain_value,
    normalize_key,
)

if TYPE_CHECKING:
    from bot.catalog.manifests import Component, OverrideDecl, Recipe

_INTERVAL_RE = re.compile(
    r"^(?P<type>int|float)\s*(?:in\s*(?P<lo_br>[\[(])\s*(?P<lo>[^,\s]+)\s*,\s*(?P<hi>[^\])\s]+)\s*(?P<hi_br>[\])])"
    r"|(?P<lo2>[-+0-9.eE]+)\s*\.\.\s*(?P<hi2>[-+0-9.eE]+))?$"
)
_CHOICE_RE = re.compile(r"^choice\s+(?P<choices>[A-Za-z0-9_.\-]+(?:\s*\|\s*[A-Za-z0-9_.\-]+)*)$")


class NotAnIntError(ValueError):
    """An int key given a number written as a float; the message is whole (key, what to write, what was written)."""


class OverrideSpec(BaseModel):
    """A parsed override declaration: `float in (0, 1e-2]`, `int 1..20`, `bool`, `str`, `choice a|b`."""

    model_config = ConfigDict(frozen=True)

    key: str
    input: str
    type: Literal["int", "float", "bool", "str", "choice"]
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    help: str | None = None

    def describe(self) -> str:
        """The type as a user reads it, e.g. `float in (0, 0.01]`."""
        if self.type == "choice":
            return "one of " + "|".join(self.choices)
        if self.low is None or self.high is None:
            return self.type
        lo, hi = _fmt(self.low, self.type), _fmt(self.high, self.type)
        if self.type == "int":
            return f"int {lo}..{hi}"
        return f"float in {'(' if self.low_open else '['}{lo}, {hi}{')' if self.high_open else ']'}"

    def coerce(self, value: Scalar, *, key: str | None = None, written: str | None = None) -> Scalar:
        """Check type and bounds of a command-line value; return it typed, or raise ValueError.

        `key` is the name the user gave (this key or its input) and `written` the value's text as typed,
        both for the message when an int key is given a float.
        """
        if self.type == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError(f"expected true or false, got {value!r}")
        if self.type == "choice":
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if text not in self.choices:
                raise ValueError(f"expected {self.describe()}, got {text!r}{did_you_mean(closest(text, self.choices))}")
            return text
        if self.type == "str":
            if isinstance(value, bool):
                return "true" if value else "false"
            # Commands built in code (buttons, resume) skip the parser: the same guard applies here.
            if not is_plain_value(str(value)):
                raise ValueError(f"{value!r} is not a plain value (no quotes, braces, templates or shell characters)")
            return str(value)
        if isinstance(value, bool | str):
            raise ValueError(f"expected {self.describe()}, got {value!r}")
        if self.type == "int":
            if isinstance(value, float):
                if math.isfinite(value) and value.is_integer() and not self._within(value):
                    # A whole number past the bounds (`max_steps=99999999999999999999999` reads as 1e23):
                    # the bounds are the answer, not how to write an int.
                    raise ValueError(f"{written or _fmt(value, 'float')} is out of bounds: {self._bounds()}")
                raise NotAnIntError(int_written_as_float(key or self.key, written or repr(value), value))
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"expected a finite number ({self.describe()})")
        self._check_bounds(value)
        return value

    def _within(self, value: float) -> bool:
        """Whether `value` lies in the declared bounds (an int without bounds: within the 18 digits an int takes)."""
        if self.type == "int" and self.low is None and abs(value) >= 10**MAX_INT_DIGITS:
            return False
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        return not (too_low or too_high)

    def _check_bounds(self, value: float) -> None:
        if not self._within(value):
            raise ValueError(f"{_fmt(value, self.type)} is out of bounds: {self._bounds()}")

    def _bounds(self) -> str:
        """The declared type as an out-of-bounds message quotes it."""
        if self.type == "int" and self.low is None:
            return f"int of at most {MAX_INT_DIGITS} digits"
        return self.describe()


def _fmt(value: float, kind: str) -> str:
    if kind == "int":
        return str(int(value))
    return f"{value:g}"


def parse_override_type(key: str, decl: OverrideDecl) -> OverrideSpec:
    """Parse a recipe's override declaration; raise ValueError with what is wrong."""
    text = decl.type.strip()
    target = decl.input or key
    if text in ("bool", "str"):
        return OverrideSpec(key=key, input=target, type=text, help=decl.help)
    choice = _CHOICE_RE.match(text)
    if choice:
        options = tuple(part.strip() for part in choice.group("choices").split("|"))
        return OverrideSpec(key=key, input=target, type="choice", choices=options, help=decl.help)
    match = _INTERVAL_RE.match(text)
    if not match:
        raise ValueError(f"unreadable type {text!r} (e.g. `float in (0, 1e-2]`, `int 1..20`, `bool`, `choice a|b`)")
    kind = match.group("type")
    if match.group("lo") is not None:
        low, high = float(match.group("lo")), float(match.group("hi"))
        low_open, high_open = match.group("lo_br") == "(", match.group("hi_br") == ")"
    elif match.group("lo2") is not None:
        low, high, low_open, high_open = float(match.group("lo2")), float(match.group("hi2")), False, False
    else:
        return OverrideSpec(key=key, input=target, type=kind, help=decl.help)
    if low > high:
        raise ValueError(f"empty interval {text!r}")
    return OverrideSpec(
        key=key, input=target, type=kind, low=low, high=high, low_open=low_open, high_open=high_open, help=decl.help
    )


def coerce_overrides(
    recipe: Recipe,
    component: Component,
    overrides: Mapping[str, Scalar],
    *,
    written: Mapping[str, str] | None = None,
) -> dict[str, Scalar]:
    """Command-line overrides as component input -> typed value; a `PlanError` for a bad key, type or bound.

    `written` is the text of the values the parser typed as floats (`RunCommand.written`), quoted when an
    int key refuses one.
    """
    command_line: dict[str, Scalar] = {}
    for key, value in overrides.items():
        override = find_override(recipe, component, key)
        text = (written or {}).get(key)
        try:
            command_line[override.input] = override.coerce(value, key=key, written=text)
        except NotAnIntError as exc:
            raise PlanError(str(exc)) from None
        except ValueError as exc:
            raise PlanError(f"{key}={text or value}: {exc}") from None
    return command_line


def settable_keys(recipe: Recipe) -> list[str]:
    """The keys a user may set on `run`, as `/finetune recipes` lists them: declared, and not pinned by the grammar."""
    return [key for key in recipe.overrides if normalize_key(key) not in PINNED_KEYS]


def find_override(recipe: Recipe, component: Component, key: str) -> OverrideSpec:
    """The override a command-line key names (by key, or by the input it sets), or a `PlanError` saying why not."""
    if key in recipe.overrides:
        return recipe.overrides[key]
    by_input = {spec.input: spec for spec in recipe.overrides.values()}
    if key in by_input:
        return by_input[key]
    names = sorted(settable_keys(recipe))
    suggestions, hints = _closest_keys(key, recipe, names)
    keys = ", ".join(f"{name} ({recipe.overrides[name].describe()})" for name in names) or "none"
    if key in component.inputs:
        raise PlanError(f"{key} is fixed by recipe {recipe.name}; it may override: {keys}", suggestions=suggestions)
    raise PlanError(
        f"recipe {recipe.name} has no key {key!r}{did_you_mean(hints)} (keys: {keys})",
        suggestions=suggestions,
    )


def _closest_keys(key: str, recipe: Recipe, names: list[str]) -> tuple[list[str], list[str]]:
    """The documented keys closest to `key`, best first, compared with each key and the input it sets.

    A typo of an input name (`learning_rat`) suggests the key that sets it: (`lr`), (`lr (sets learning_rate)`).
    """
    by_text: dict[str, str] = {}
    for name in names:
        by_text.setdefault(name, name)
    for name in names:
        by_text.setdefault(recipe.overrides[name].input, name)
    suggestions: list[str] = []
    hints: list[str] = []
    for text in closest(key, list(by_text), n=6):
        name = by_text[text]
        if name in suggestions:
            continue
        suggestions.append(name)
        hints.append(name if text == name else f"{name} (sets {text})")
    return suggestions[:3], hints[:3]
