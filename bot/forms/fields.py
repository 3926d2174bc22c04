"""The run form's fields, read from the catalog, and what a person entered, checked field by field. Pure.

A form is the `run` command with one field per training key: what it submits is the command text the
parser reads (`run recipe=… preset=… key=value …`), so the form and the command cannot disagree. Only what
differs from the recipe's defaults goes into that text, so a run started from the form records the same
overrides, and the same provenance, as one typed with those values.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from bot.catalog import Catalog, OverrideSpec, PlanError, Preset, Recipe
from bot.catalog.overrides import settable_keys
from bot.grammar import CommandError, Scalar, parse_scalar, scalar_text
from bot.slack.channels import is_channel_id

# The modal and its parts: block ids name the recipe, so choosing another recipe shows its own defaults
# (Slack keeps what was entered in a field whose block_id and action_id stay the same).
FORM_CALLBACK = "finetune_run_form"
ACTION_PREFIX = "finetune_form:"
RECIPE_ACTION = ACTION_PREFIX + "recipe"
PREVIEW_ACTION = ACTION_PREFIX + "preview"
OPEN_ACTION = ACTION_PREFIX + "open"
RECIPE_BLOCK = "recipe"
CHANNEL_BLOCK = "channel"
ACTIONS_BLOCK = "form_actions"
VALUE = "value"


def presets_block(recipe: str) -> str:
    """The block id of a recipe's presets field."""
    return f"presets:{recipe}"


def key_block(recipe: str, key: str) -> str:
    """The block id of one training key's field."""
    return f"key:{recipe}:{key}"


ORIGINS = frozenset({"command", "home", "rerun"})


@dataclass(frozen=True)
class FormContext:
    """What the modal remembers (its private_metadata, sealed by bot.forms.seal): the channel it came from, where it
    was opened, and who opened it (only they may submit it)."""

    channel: str | None = None
    origin: str = "command"  # one of ORIGINS
    rerun_of: str | None = None
    opener: str = ""


@dataclass(frozen=True)
class Prefill:
    """What a form starts with: a recipe, its presets and overrides (a rerun's), or nothing chosen yet."""

    recipe: str | None = None
    presets: tuple[str, ...] | None = None
    overrides: dict[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True)
class FieldSpec:
    """One training key as a form field."""

    key: str
    spec: OverrideSpec
    default: Scalar | None

    @property
    def label(self) -> str:
        """The key, and the component input it sets when that has another name."""
        return self.key if self.spec.input == self.key else f"{self.key} ({self.spec.input})"

    @property
    def hint(self) -> str:
        """Type and bounds, the recipe's default, and the declared help."""
        default = "" if self.default is None else f" · recipe default {scalar_text(self.default)}"
        help_text = f" · {self.spec.help}" if self.spec.help else ""
        return f"{self.spec.describe()}{default}{help_text}"


def field_specs(catalog: Catalog, recipe: Recipe) -> list[FieldSpec]:
    """The recipe's settable keys, in its order, with their defaults (the recipe's, else the component's)."""
    component = catalog.components[recipe.spec.component]
    specs = []
    for key in settable_keys(recipe):
        spec = recipe.overrides[key]
        default = recipe.spec.defaults.get(spec.input)
        if default is None and spec.input in component.inputs:
            value = component.inputs[spec.input].value
            default = value if isinstance(value, bool | int | float | str) else None
        specs.append(FieldSpec(key=key, spec=spec, default=default))
    return specs


def allowed_presets(catalog: Catalog, recipe: Recipe) -> list[Preset]:
    """Presets that fit the recipe's component (its run kind)."""
    kind = catalog.components[recipe.spec.component].run_kind
    return [p for p in catalog.presets.values() if p.target_kind in (None, kind)]


@dataclass
class Entered:
    """What a person entered in the form: read from the view's state, each value's type checked."""

    context: FormContext
    recipe: str | None = None
    channel: str | None = None
    presets: list[str] | None = None
    values: dict[str, str] = field(default_factory=dict)  # key -> text, only fields that hold something
    # Block id -> why its value was not used: it came back as something other than what Slack sends there.
    problems: dict[str, str] = field(default_factory=dict)


NOT_TEXT = "This field came back as something other than text: enter it again."
NOT_A_CHANNEL = "That is not a channel: choose one from the list."


class _Malformed(Exception):
    """A state value of another type than Slack sends there."""


def read_entered(view: dict[str, Any], context: FormContext) -> Entered:
    """The form's state (`view.state.values`) as its fields, for the context its private_metadata was sealed with.

    Every value is type-checked before use: where Slack sends a string or an option, anything else (a JSON object,
    a number, a list) is a problem on that field, never used and never an exception. The channel is read from the
    state only when the form asked for one (a form opened in a channel posts there, whatever the state says).
    """
    values = _obj(_obj(view.get("state")).get("values"))
    entered = Entered(context=context, channel=context.channel)
    try:
        entered.recipe = _option_value(_state(values, RECIPE_BLOCK, RECIPE_ACTION).get("selected_option"))
    except _Malformed:
        entered.problems[RECIPE_BLOCK] = NOT_TEXT
    if context.channel is None:
        try:
            chosen = _text(_state(values, CHANNEL_BLOCK, VALUE).get("selected_conversation"))
        except _Malformed:
            chosen = None
            entered.problems[CHANNEL_BLOCK] = NOT_A_CHANNEL
        if chosen and not is_channel_id(chosen):
            entered.problems[CHANNEL_BLOCK] = NOT_A_CHANNEL
        elif chosen:
            entered.channel = chosen
    if entered.recipe is None:
        return entered
    presets = _obj(values.get(presets_block(entered.recipe)))
    if VALUE in presets:
        try:
            entered.presets = _option_values(_obj(presets[VALUE]).get("selected_options"))
        except _Malformed:
            entered.problems[presets_block(entered.recipe)] = NOT_TEXT
    prefix = key_block(entered.recipe, "")
    for block_id, actions in values.items():
        if not block_id.startswith(prefix):
            continue
        state = _obj(_obj(actions).get(VALUE))
        try:
            text = _text(state.get("value"))
            if text is None:
                text = _option_value(state.get("selected_option"))
        except _Malformed:
            entered.problems[block_id] = NOT_TEXT
            continue
        if text is not None and text.strip():
            entered.values[block_id.removeprefix(prefix)] = text.strip()
    return entered


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _state(values: dict[str, Any], block_id: str, action_id: str) -> dict[str, Any]:
    return _obj(_obj(values.get(block_id)).get(action_id))


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _Malformed


def _option_value(option: object) -> str | None:
    if option is None:
        return None
    if not isinstance(option, dict):
        raise _Malformed
    return _text(option.get("value"))


def _option_values(options: object) -> list[str]:
    if options is None:
        return []
    if not isinstance(options, list):
        raise _Malformed
    picked = [_option_value(o) for o in options]
    return [p for p in picked if p is not None]


@dataclass
class Checked:
    """A form checked field by field: the command text it stands for, or the errors by block id."""

    text: str | None
    errors: dict[str, str]


def check_entered(catalog: Catalog, entered: Entered, *, needs_channel: bool) -> Checked:
    """Check each field as the catalog would; the `run` command text when every field holds."""
    errors: dict[str, str] = {}
    if needs_channel and CHANNEL_BLOCK in entered.problems:
        errors[CHANNEL_BLOCK] = entered.problems[CHANNEL_BLOCK]
    elif needs_channel and not entered.channel:
        errors[CHANNEL_BLOCK] = "Choose the channel the run's card goes to."
    if RECIPE_BLOCK in entered.problems:
        return Checked(None, {**errors, RECIPE_BLOCK: entered.problems[RECIPE_BLOCK]})
    if entered.recipe is None:
        errors[RECIPE_BLOCK] = "Choose a recipe."
        return Checked(None, errors)
    try:
        recipe = catalog.recipe(entered.recipe)
    except PlanError as exc:
        return Checked(None, {**errors, RECIPE_BLOCK: exc.message})
    parts = ["run", f"recipe={recipe.name}"]
    if presets_block(recipe.name) in entered.problems:
        errors[presets_block(recipe.name)] = entered.problems[presets_block(recipe.name)]
    presets = _presets_part(recipe, entered.presets)
    if presets:
        parts.append(presets)
    for spec in field_specs(catalog, recipe):
        if key_block(recipe.name, spec.key) in entered.problems:
            errors[key_block(recipe.name, spec.key)] = entered.problems[key_block(recipe.name, spec.key)]
            continue
        text = entered.values.get(spec.key)
        if text is None:
            continue
        try:
            value = spec.spec.coerce(parse_scalar(text), key=spec.key, written=text)
        except CommandError as exc:  # shown under the field: no need to name it
            errors[key_block(recipe.name, spec.key)] = exc.message
            continue
        except ValueError as exc:
            errors[key_block(recipe.name, spec.key)] = str(exc)
            continue
        if spec.default is None or value != _typed_default(spec):
            parts.append(f"{spec.key}={shlex.quote(text)}")
    return Checked(None if errors else " ".join(parts), errors)


def _typed_default(spec: FieldSpec) -> Scalar | None:
    try:
        return spec.spec.coerce(spec.default) if spec.default is not None else None
    except ValueError:
        return spec.default


def _presets_part(recipe: Recipe, presets: list[str] | None) -> str | None:
    """`preset=a,b`, or None when the selection is the recipe's defaults (so provenance says so)."""
    if presets is None or list(presets) == list(recipe.spec.presets):
        return None
    if not presets:
        # Nothing picked: the recipe's defaults apply, as on the command line without preset=.
        return None
    # Quoted: an option value is whatever the payload says, and must stay one word of the command.
    return "preset=" + shlex.quote(",".join(presets))


def error_block(message: str, entered: Entered) -> str:
    """The field a catalog refusal is about: presets, a named training key, or the recipe."""
    recipe = entered.recipe or ""
    lowered = message.lower()
    for key in entered.values:
        if f"{key}=" in lowered or f"{key}:" in lowered or f"`{key}`" in lowered or f" {key} " in f" {lowered} ":
            return key_block(recipe, key)
    if "preset" in lowered or "memory" in lowered:
        return presets_block(recipe)
    return RECIPE_BLOCK
