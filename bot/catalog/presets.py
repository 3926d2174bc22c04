"""Presets: what a preset file may hold, and which presets a run gets, in the order they stack.

A preset sets cluster settings only (queue, resources, placement, retries, connections): never a
training key, the command, the image or the environment. Each preset belongs to one family — what it
decides: `resources`, `placement`, `storage` or `generation` (how GRPO and RLOO generate: vLLM colocated with
training or a vLLM server beside it) — and a run gets at most one preset of each family. The
recipe's default presets stay unless the user names a preset of the same family, which replaces it; two
presets of one family are refused. Presets stack in order (the recipe's kept defaults, then the user's);
Polyaxon's patch strategies merge them (`bot.polyaxon.spec`). What the merged presets ask of the cluster
is `resources.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from bot.catalog.errors import CatalogError, PlanError
from bot.catalog.manifests import PRESET_PARAMS, Component, Preset, Recipe
from bot.catalog.policy import duration_s
from bot.grammar import closest, did_you_mean

FAMILIES = ("resources", "placement", "storage", "generation")
# Catalog metadata: read by the bot, removed before Polyaxon merges the preset.
METADATA_KEYS = frozenset({"name", "description", "family", "maxPending", "maxDuration"})
PRESET_KEYS = frozenset(
    {
        "name",
        "description",
        "family",
        "maxPending",
        "maxDuration",
        "kind",
        "version",
        "isPreset",
        "isApproved",
        "patchStrategy",
        "queue",
        "namespace",
        "runPatch",
        "termination",
        "params",
        "cache",
        "plugins",
    }
)
JOB_PATCH_KEYS = frozenset({"container", "environment", "connections", "volumes", "init", "sidecars"})
DISTRIBUTED_PATCH_KEYS = frozenset({"master", "worker", "cleanPodPolicy", "schedulingPolicy"})
# Inside a preset these would change what is trained, not where.
FORBIDDEN_CONTAINER_KEYS = frozenset({"command", "args", "image", "env", "envFrom", "workingDir"})


def _walk_keys(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path, str(key)
            yield from _walk_keys(value, path)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk_keys(item, f"{prefix}[{index}]")


def parse_preset(data: dict[str, Any], stem: str, rel: str, training_keys: frozenset[str]) -> Preset:
    """Validate a preset file's document (named `stem`); raise `CatalogError` naming the file and field."""
    if data.get("name") != stem:
        raise CatalogError(rel, "name", f"must equal the file name {stem!r}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise CatalogError(rel, "description", "give a one-line description")
    if data.get("kind") != "operation" or data.get("isPreset") is not True:
        raise CatalogError(rel, "kind", "a preset is `kind: operation` with `isPreset: true`")
    for key in data:
        if key not in PRESET_KEYS:
            raise CatalogError(rel, key, f"not a preset key (allowed: {', '.join(sorted(PRESET_KEYS))})")
    params = data.get("params") or {}
    for key in params:
        if key not in PRESET_PARAMS:
            what = (
                "a training key; training keys belong in recipes"
                if key in training_keys
                else "not a placement parameter"
            )
            raise CatalogError(rel, f"params.{key}", f"{what} (a preset may set: {', '.join(sorted(PRESET_PARAMS))})")
    run_patch = data.get("runPatch") or {}
    if not isinstance(run_patch, dict):
        raise CatalogError(rel, "runPatch", "expected a mapping")
    for path_, key in _walk_keys(run_patch):
        if key in training_keys:
            raise CatalogError(rel, f"runPatch.{path_}", f"{key} is a training key; training keys belong in recipes")
        leaf_parent = path_.rsplit(".", 1)[0] if "." in path_ else ""
        if key in FORBIDDEN_CONTAINER_KEYS and leaf_parent.endswith("container"):
            raise CatalogError(rel, f"runPatch.{path_}", "a preset may not change the command, image or environment")
    keys = set(run_patch)
    if keys & DISTRIBUTED_PATCH_KEYS and keys & JOB_PATCH_KEYS:
        raise CatalogError(
            rel, "runPatch", "mixes job keys (container, environment) with pytorchjob keys (master, worker)"
        )
    target = "pytorchjob" if keys & DISTRIBUTED_PATCH_KEYS else ("job" if keys else None)
    family = data.get("family") or infer_family(data)
    if family not in FAMILIES:
        raise CatalogError(rel, "family", f"{family!r} is not a preset family (one of {', '.join(FAMILIES)})")
    for key in ("maxPending", "maxDuration"):  # durations: seconds, or 10m, 2h, 1d
        if data.get(key) is not None:
            try:
                duration_s(data[key])
            except ValueError as exc:
                raise CatalogError(rel, key, str(exc)) from exc
    document = {key: value for key, value in data.items() if key not in METADATA_KEYS}
    return Preset(
        name=data["name"],
        file=rel,
        description=description.strip(),
        document=document,
        target_kind=target,
        params=params,
        family=family,
        max_pending=data.get("maxPending"),
        max_duration=data.get("maxDuration"),
    )


def infer_family(data: Mapping[str, Any]) -> str:
    """The family of a preset that does not name one: what it sets decides.

    Resources (container resources, distributed replicas) make a resources preset, whatever node pool and
    queue come with them; connections and checkpoint storage make a storage preset; anything else (node
    selectors, tolerations, affinity, retries) is placement.
    """
    run_patch = data.get("runPatch") or {}
    if (run_patch.get("container") or {}).get("resources") or set(run_patch) & DISTRIBUTED_PATCH_KEYS:
        return "resources"
    if data.get("params") or run_patch.get("connections") or run_patch.get("volumes"):
        return "storage"
    return "placement"


def find_preset(presets: Mapping[str, Preset], name: str) -> Preset:
    """The preset called `name`, or a `PlanError` with the closest names."""
    if name in presets:
        return presets[name]
    suggestions = closest(name, list(presets))
    raise PlanError(f"no preset {name!r}{did_you_mean(suggestions)} (see /finetune presets)", suggestions=suggestions)


class PresetChoice(BaseModel):
    """The presets a run gets, in stacking order, and where each came from."""

    presets: list[Preset]
    # preset name -> "recipe default" or "command line"
    sources: dict[str, str] = Field(default_factory=dict)
    # (recipe default, the user's preset that replaced it)
    replaced: list[tuple[Preset, Preset]] = Field(default_factory=list)


def presets_for_run(
    requested: Sequence[str], recipe: Recipe, component: Component, presets: Mapping[str, Preset]
) -> PresetChoice:
    """The recipe's default presets, each replaced by the user's preset of its family, then the user's others.

    Two presets of one family are refused with both names; every preset must fit the component's run kind.
    """
    named = [find_preset(presets, name) for name in requested]
    by_family: dict[str, Preset] = {}
    for preset in named:
        other = by_family.get(preset.family)
        if other is not None:
            raise _family_conflict(other, preset, requested, recipe, component, presets)
        by_family[preset.family] = preset
    defaults = [find_preset(presets, name) for name in recipe.spec.presets]
    kept = [preset for preset in defaults if preset.family not in by_family]
    replaced = [
        (preset, by_family[preset.family])
        for preset in defaults
        if preset.family in by_family and by_family[preset.family].name != preset.name
    ]
    sources = {preset.name: "recipe default" for preset in kept}
    sources.update({preset.name: "command line" for preset in named})
    chosen = kept + named
    for preset in chosen:
        if preset.target_kind is not None and preset.target_kind != component.run_kind:
            fitting = sorted(p.name for p in presets.values() if p.target_kind in (None, component.run_kind))
            raise PlanError(
                f"preset {preset.name} is for {preset.target_kind} components, but recipe {recipe.name} uses "
                f"{component.name} ({component.run_kind}); presets that fit: {', '.join(fitting)}",
                suggestions=fitting,
            )
    return PresetChoice(presets=chosen, sources=sources, replaced=replaced)


def _family_conflict(
    first: Preset,
    second: Preset,
    requested: Sequence[str],
    recipe: Recipe,
    component: Component,
    presets: Mapping[str, Preset],
) -> PlanError:
    """Two presets of one family: the refusal, suggesting whole `preset=` values that would plan instead.

    Each alternative is the user's list without one of the two, kept only if it stacks and fits the recipe's
    component; the example of stacking is built from presets that fit this recipe, not a fixed pair.
    """
    family = first.family
    alternatives: list[str] = []
    for dropped in (second.name, first.name):
        names = [name for name in requested if name != dropped]
        try:
            presets_for_run(names, recipe, component, presets)
        except PlanError:
            continue
        alternatives.append("preset=" + ",".join(names))
    fits = [p for p in presets.values() if p.target_kind in (None, component.run_kind)]
    other_family = next((p for p in fits if p.family != family), None)
    example = f", e.g. preset={first.name},{other_family.name}" if other_family is not None else ""
    choices = " or ".join(f"`{text}`" for text in alternatives)
    instead = f"; try {choices}" if alternatives else ""
    return PlanError(
        f"presets {first.name} and {second.name} both set {family}: give one {family} preset{instead} "
        f"(presets of different families stack{example})",
        suggestions=alternatives,
    )
