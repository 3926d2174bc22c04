"""The `recipes` and `presets` replies: the catalog as a user browses it."""

from __future__ import annotations

from typing import Any

from bot.catalog import Catalog
from bot.catalog.overrides import settable_keys
from bot.explain.help import USAGE
from bot.slack.blocks import cap_blocks, context, escape, header, section, sections


def render_recipes(catalog: Catalog) -> list[dict[str, Any]]:
    """The `recipes` reply: one section per recipe."""
    blocks: list[dict[str, Any]] = [header("Recipes")]
    for recipe in catalog.recipes.values():
        spec = recipe.spec
        # Keys the grammar refuses (`resume_from`: only `/finetune resume` sets it) are not offered.
        keys = (
            ", ".join(f"`{escape(k)}` ({escape(recipe.overrides[k].describe())})" for k in settable_keys(recipe))
            or "none"
        )
        flags = " · :warning: exploration (non-comparable runs)" if spec.exploration else ""
        blocks.append(
            section(
                f"*{escape(recipe.name)}* — {escape(recipe.description)}\n"
                f"component `{escape(str(spec.component))}` · presets "
                f"{', '.join(f'`{escape(p)}`' for p in spec.presets) or 'none'}{flags}\n"
                f"overridable: {keys}"
            )
        )
    blocks.append(context(f"Run one: `{USAGE['run']}`"))
    return cap_blocks(blocks, "…more recipes than fit in one message; see manifests/recipes/.")


def render_presets(catalog: Catalog) -> list[dict[str, Any]]:
    """The `presets` reply: one line per preset, in stacking order notes."""
    lines = []
    for preset in catalog.presets.values():
        target = f" (for {escape(str(preset.target_kind))} components)" if preset.target_kind == "pytorchjob" else ""
        lines.append(f"• *{escape(preset.name)}* — {escape(preset.description)}{target}")
    blocks = [header("Presets"), *sections("", lines)]
    blocks.append(context("Presets stack in the order given: `preset=gpu-1x,spot` applies gpu-1x, then spot."))
    return cap_blocks(blocks, "…more presets than fit in one message; see manifests/presets/.")
