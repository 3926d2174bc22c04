"""The `recipes` and `presets` replies: the catalog as a user browses it."""

from __future__ import annotations

from typing import Any

from bot.catalog import Catalog
from bot.catalog.overrides import settable_keys
from bot.explain.help import USAGE
from bot.slack.blocks import cap_blocks, context, escape, header, section, sections


def render_recipes(catalog: Catalog) -> list[dict[str, Any]]:
    """The `recipes` reply: one section per recipe."""
    blocks: list[dict[str, Any]] = [header("Recipes"), *catalog_state(catalog)]
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
    blocks = [header("Presets"), *catalog_state(catalog), *sections("", lines)]
    blocks.append(context("Presets stack in the order given: `preset=gpu-1x,spot` applies gpu-1x, then spot."))
    return cap_blocks(blocks, "…more presets than fit in one message; see manifests/presets/.")


def catalog_state(catalog: Catalog) -> list[dict[str, Any]]:
    """Which catalog this is (its revision, when it was loaded) and, when the newest change was refused, one line
    with when and why (the catalog shown is still the one in force)."""
    blocks: list[dict[str, Any]] = []
    if catalog.revision is not None:
        loaded = f" · loaded {catalog.loaded_at:%Y-%m-%d %H:%M} UTC" if catalog.loaded_at is not None else ""
        blocks.append(context(f"Catalog `{escape(catalog.revision)}`{loaded}"))
    if catalog.refused is not None:
        at, why = catalog.refused
        blocks.append(
            section(
                f":warning: A change of the catalog at {at:%H:%M} UTC was refused, so the catalog below is still the "
                f"one in force: `{escape(why[:400])}`"
            )
        )
    return blocks
