"""The catalog's reward functions (`manifests/rewards.yaml`): names GRPO and RLOO runs may choose, and what each reads.

The functions themselves are the trainer's (`trainer.rewards.REGISTRY`), pinned with the rest of its code by
the recipe's code digest; the catalog knows their names and the dataset columns they read, so a run naming an
unknown one, or one whose column the dataset lacks, is refused before anything is submitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from bot.catalog.errors import CatalogError, PlanError
from bot.catalog.yamlfile import safe_load
from bot.grammar import closest, did_you_mean

REWARDS_FILE = "rewards.yaml"


@dataclass(frozen=True)
class RewardFunction:
    """One named reward function: what it scores and the dataset columns it reads."""

    name: str
    description: str
    reads: tuple[str, ...] = ()


def load_rewards(root: Path) -> dict[str, RewardFunction]:
    """`rewards.yaml` of the catalog folder `root` (none: no reward functions)."""
    path = root / REWARDS_FILE
    if not path.is_file():
        return {}
    try:
        data = safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(REWARDS_FILE, "(file)", f"not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(REWARDS_FILE, "(file)", "expected a mapping of reward names")
    rewards: dict[str, RewardFunction] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("description"), str):
            raise CatalogError(REWARDS_FILE, str(name), "needs a `description`")
        reads = entry.get("reads") or []
        if not isinstance(reads, list) or not all(isinstance(c, str) for c in reads):
            raise CatalogError(REWARDS_FILE, f"{name}.reads", "a list of column names")
        unknown = set(entry) - {"description", "reads"}
        if unknown:
            raise CatalogError(REWARDS_FILE, f"{name}.{sorted(unknown)[0]}", "not a field (description, reads)")
        rewards[str(name)] = RewardFunction(str(name), entry["description"], tuple(reads))
    return rewards


def choose_rewards(text: str, known: dict[str, RewardFunction]) -> tuple[str, ...]:
    """The names of `rewards=a,b`, each known and none twice; a `PlanError` naming the known ones otherwise."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    listed = ", ".join(known) or "(none)"
    if not names:
        raise PlanError(f"rewards= names no reward function; known: {listed}")
    for name in names:
        if name not in known:
            suggestions = closest(name, list(known))
            raise PlanError(
                f"no reward function {name!r}{did_you_mean(suggestions)}; known: {listed}", suggestions=suggestions
            )
    if len(set(names)) != len(names):
        raise PlanError(f"rewards={text} names a reward function twice")
    return names


def missing_reads(names: tuple[str, ...], known: dict[str, RewardFunction], columns: tuple[str, ...]) -> str | None:
    """Why the dataset cannot feed these reward functions (a column one reads is missing), or None."""
    for name in names:
        lacking = [column for column in known[name].reads if column not in columns]
        if lacking:
            return f"reward function {name} reads the column {lacking[0]!r}"
    return None
