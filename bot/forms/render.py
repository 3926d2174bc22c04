"""The run form's views: the form (recipe first, then that recipe's fields) and its preview. Pure."""

from __future__ import annotations

from typing import Any

from bot.catalog import Catalog, Plan, Recipe
from bot.explain import render_plan
from bot.forms.fields import (
    ACTIONS_BLOCK,
    CHANNEL_BLOCK,
    FORM_CALLBACK,
    PREVIEW_ACTION,
    RECIPE_ACTION,
    RECIPE_BLOCK,
    VALUE,
    FieldSpec,
    FormContext,
    Prefill,
    allowed_presets,
    field_specs,
    key_block,
    presets_block,
)
from bot.forms.seal import FormSeal
from bot.grammar import Scalar, scalar_text
from bot.slack.blocks import context, escape, section
from bot.slack.views import View, button, input_block, modal, option

FORM_TITLE = "New fine-tuning run"
PREVIEW_TITLE = "Preview"


def render_form(catalog: Catalog, ctx: FormContext, prefill: Prefill, seal: FormSeal) -> View:
    """The run form: channel (when it came from no channel), recipe, and once one is chosen its presets and keys;
    its context sealed into private_metadata."""
    blocks: list[dict[str, Any]] = []
    if ctx.rerun_of:
        blocks.append(context(f"Rerun of `{escape(ctx.rerun_of)}` with changes: its recipe, presets and overrides."))
    if ctx.channel is None:
        channel_select = {
            "type": "conversations_select",
            "action_id": VALUE,
            "filter": {"include": ["public", "private"], "exclude_bot_users": True},
        }
        blocks.append(input_block(CHANNEL_BLOCK, "Channel for the run's card", channel_select))
    recipe = catalog.recipes.get(prefill.recipe or "")
    recipe_select: dict[str, Any] = {
        "type": "static_select",
        "action_id": RECIPE_ACTION,
        "placeholder": {"type": "plain_text", "text": "Choose a recipe"},
        "options": [option(r.name, r.name, r.description) for r in catalog.recipes.values()],
    }
    if recipe is not None:
        recipe_select["initial_option"] = option(recipe.name, recipe.name, recipe.description)
    hint = "Training choices come from the recipe; cluster settings only from presets."
    blocks.append(input_block(RECIPE_BLOCK, "Recipe", recipe_select, hint=hint, dispatch=True))
    if recipe is not None:
        blocks += _recipe_blocks(catalog, recipe, prefill)
    return modal(
        FORM_TITLE,
        blocks,
        callback_id=FORM_CALLBACK,
        submit="Start run",
        close="Cancel",
        private_metadata=seal.seal(ctx),
    )


def _recipe_blocks(catalog: Catalog, recipe: Recipe, prefill: Prefill) -> list[dict[str, Any]]:
    spec = recipe.spec
    flags = " · :warning: exploration: runs are non-comparable" if spec.exploration else ""
    blocks: list[dict[str, Any]] = [
        context(
            f"*{escape(recipe.name)}*: {escape(recipe.description)} · component `{escape(str(spec.component))}`{flags}"
        )
    ]
    allowed = allowed_presets(catalog, recipe)
    names = [p.name for p in allowed]
    chosen = [p for p in (prefill.presets if prefill.presets is not None else spec.presets) if p in names]
    presets_select: dict[str, Any] = {
        "type": "multi_static_select",
        "action_id": VALUE,
        "placeholder": {"type": "plain_text", "text": "The recipe's defaults"},
        "options": [option(p.name, p.name, p.description) for p in allowed],
    }
    if chosen:
        by_name = {p.name: p for p in allowed}
        presets_select["initial_options"] = [option(n, n, by_name[n].description) for n in chosen]
    defaults = ", ".join(spec.presets) or "none"
    blocks.append(
        input_block(
            presets_block(recipe.name),
            "Presets",
            presets_select,
            hint=f"Cluster settings, applied in order; one per family (resources, placement, storage). "
            f"Recipe default: {defaults}.",
            optional=True,
        )
    )
    for field in field_specs(catalog, recipe):
        initial = prefill.overrides.get(field.key, field.default)
        blocks.append(
            input_block(
                key_block(recipe.name, field.key),
                field.label,
                _element(field, initial),
                hint=field.hint,
                optional=True,
            )
        )
    blocks.append(
        {
            "type": "actions",
            "block_id": ACTIONS_BLOCK,
            "elements": [button("Preview (dry run)", PREVIEW_ACTION)],
        }
    )
    return blocks


def _element(field: FieldSpec, initial: Scalar | None) -> dict[str, Any]:
    """The element for a key's type: numbers for ints, text for floats (2e-5 stays 2e-5), selects for the rest."""
    spec = field.spec
    text = None if initial is None else scalar_text(initial)
    if spec.type in ("bool", "choice"):
        choices = ("true", "false") if spec.type == "bool" else spec.choices
        element: dict[str, Any] = {
            "type": "static_select",
            "action_id": VALUE,
            "options": [option(c) for c in choices],
        }
        if text in choices:
            element["initial_option"] = option(text)
        return element
    if spec.type == "int":
        element = {"type": "number_input", "action_id": VALUE, "is_decimal_allowed": False}
        if spec.low is not None and not spec.low_open:
            element["min_value"] = str(int(spec.low))
        if spec.high is not None and not spec.high_open:
            element["max_value"] = str(int(spec.high))
    else:
        element = {"type": "plain_text_input", "action_id": VALUE}
        if spec.type == "float":
            element["placeholder"] = {"type": "plain_text", "text": "a number, e.g. 2e-5"}
    if text is not None:
        element["initial_value"] = text
    return element


def render_preview(
    plan: Plan | None, errors: dict[str, str], labels: dict[str, str], *, estimate: str | None = None
) -> View:
    """The preview pushed over the form: the plan as `--dry-run` shows it, or what to fix first, field by field."""
    if plan is None:
        lines = [f"• *{escape(labels.get(block, block))}*: {escape(message)}" for block, message in errors.items()]
        blocks = [section(":x: Nothing can be planned yet. Fix these, then preview again:\n" + "\n".join(lines))]
    else:
        blocks = render_plan(plan, estimate=estimate)
        if errors:
            lines = [f"• {escape(message)}" for message in errors.values()]
            blocks.insert(1, section(":no_entry: Submitting would be refused:\n" + "\n".join(lines)))
    return modal(PREVIEW_TITLE, blocks, close="Back")


def field_labels(catalog: Catalog, recipe: str | None) -> dict[str, str]:
    """Block id -> the label a person sees, for messages that name fields."""
    labels = {RECIPE_BLOCK: "Recipe", CHANNEL_BLOCK: "Channel"}
    found = catalog.recipes.get(recipe or "")
    if found is not None:
        labels[presets_block(found.name)] = "Presets"
        labels.update({key_block(found.name, f.key): f.label for f in field_specs(catalog, found)})
    return labels
