"""Explaining: help and usage, the catalog's recipes and presets, dry-run plans, and user errors."""

from bot.explain.catalog import render_presets, render_recipes
from bot.explain.help import HELP, THREAD_NOTE, USAGE, render_command_error, render_help
from bot.explain.outage import polyaxon_down_text, polyaxon_refused_text
from bot.explain.plan import render_plan

__all__ = [
    "HELP",
    "THREAD_NOTE",
    "USAGE",
    "polyaxon_down_text",
    "polyaxon_refused_text",
    "render_command_error",
    "render_help",
    "render_plan",
    "render_presets",
    "render_recipes",
]
