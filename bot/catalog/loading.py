"""Reading and validating `manifests/`: components, presets and recipes, each error naming the file and field.

What a preset may hold is checked in `presets.py`; the schema of a recipe file is `RecipeFile`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from bot.catalog.alerts import CUSTOM, not_applying
from bot.catalog.choices import check_recipe, dataset_entry
from bot.catalog.datasets import DatasetEntry, RowCache, load_datasets, local_entry
from bot.catalog.errors import CatalogError
from bot.catalog.harness import HarnessTask, Suite, load_suites, load_tasks
from bot.catalog.manifests import PINNED_INPUTS, PRESET_PARAMS, Component, InputSpec, Preset, Recipe, RecipeFile
from bot.catalog.overrides import OverrideSpec, parse_override_type
from bot.catalog.presets import parse_preset
from bot.catalog.rewards import RewardFunction, load_rewards
from bot.catalog.schema_errors import explain
from bot.catalog.trainers import component_trainer
from bot.catalog.yamlfile import safe_load
from bot.grammar import closest, did_you_mean, is_cluster_key


@dataclass(frozen=True)
class Manifests:
    """Everything under a catalog folder, validated."""

    components: dict[str, Component]
    presets: dict[str, Preset]
    recipes: dict[str, Recipe]
    datasets: dict[str, DatasetEntry]
    rewards: dict[str, RewardFunction]
    tasks: dict[str, HarnessTask]
    suites: dict[str, Suite]
    # Recipes' local dataset folders that no catalog entry names, checked whole, by path.
    recipe_data: dict[str, DatasetEntry]


def load_manifests(root: Path, rows: RowCache | None = None) -> Manifests:
    """Read and validate every manifest under `root`; raise `CatalogError` naming the file and field. Local datasets'
    rows are checked whole (`rows` remembers files already checked); what is wrong with them is kept on their
    entries, not raised."""
    rows = rows or RowCache()
    components: dict[str, Component] = {}
    for path in sorted((root / "components").glob("*.yaml")):
        component = _load_component(path, path.relative_to(root).as_posix())
        components[component.name] = component
    training_keys = frozenset(
        name for component in components.values() for name in component.inputs if name not in PRESET_PARAMS
    ) - {"image"}
    presets: dict[str, Preset] = {}
    for path in sorted((root / "presets").glob("*.yaml")):
        rel = path.relative_to(root).as_posix()
        preset = parse_preset(_read_yaml(path, rel), path.stem, rel, training_keys)
        presets[preset.name] = preset
    datasets = load_datasets(root, rows)
    rewards = load_rewards(root)
    tasks = load_tasks(root)
    suites = load_suites(root, tasks)
    recipes: dict[str, Recipe] = {}
    for path in sorted((root / "recipes").glob("*.yaml")):
        rel = path.relative_to(root).as_posix()
        recipe = _load_recipe(path, rel, components, presets, datasets, rewards, suites)
        recipes[recipe.name] = recipe
    if not recipes:
        raise CatalogError("recipes/", "(folder)", "no recipes found")
    recipe_data: dict[str, DatasetEntry] = {}
    for recipe in recipes.values():
        refs = (recipe.spec.dataset, recipe.spec.eval.dataset if recipe.spec.eval else None)
        for ref in refs:
            if ref is None or ref.path is None or ref.path in recipe_data or dataset_entry(ref, datasets) is not None:
                continue
            entry = local_entry(ref.path, root.parent, rows, used_by=recipe.file)
            if entry is not None:
                recipe_data[ref.path] = entry
    return Manifests(components, presets, recipes, datasets, rewards, tasks, suites, recipe_data)


def _read_yaml(path: Path, rel: str) -> dict[str, Any]:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CatalogError(rel, "(file)", f"not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(rel, "(file)", "expected a mapping at the top level")
    return data


def _validation_error(rel: str, exc: ValidationError, schema: type[BaseModel]) -> CatalogError:
    field, message = explain(exc, schema)
    return CatalogError(rel, field, message)


def _load_component(path: Path, rel: str) -> Component:
    data = _read_yaml(path, rel)
    if data.get("kind") != "component":
        raise CatalogError(rel, "kind", "expected `kind: component`")
    if data.get("name") != path.stem:
        raise CatalogError(rel, "name", f"must equal the file name {path.stem!r}")
    run = data.get("run")
    if not isinstance(run, dict) or run.get("kind") not in ("job", "pytorchjob"):
        raise CatalogError(rel, "run.kind", "expected job or pytorchjob")
    inputs: dict[str, InputSpec] = {}
    for index, item in enumerate(data.get("inputs") or []):
        if not isinstance(item, dict) or "name" not in item or "type" not in item:
            raise CatalogError(rel, f"inputs[{index}]", "each input needs a name and a type")
        if item["name"] in inputs:
            raise CatalogError(rel, f"inputs[{index}].name", f"{item['name']} is declared twice")
        inputs[item["name"]] = InputSpec(
            name=item["name"], type=item["type"], value=item.get("value"), optional=bool(item.get("isOptional"))
        )
    return Component(
        name=data["name"],
        file=rel,
        description=str(data.get("description", "")),
        run_kind=run["kind"],
        inputs=inputs,
        document=data,
    )


def _check_axolotl_pins(rel: str, spec: RecipeFile, text: str) -> None:
    """The Axolotl config must train the model (and revision) the recipe pins."""
    try:
        config = safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogError(rel, "axolotl_config", f"not valid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise CatalogError(rel, "axolotl_config", "expected a mapping")
    if spec.model is not None and spec.model.id is not None:
        if config.get("base_model") != spec.model.id:
            raise CatalogError(
                rel,
                "axolotl_config",
                f"base_model {config.get('base_model')!r} is not the pinned model {spec.model.id}",
            )
        if spec.model.revision and config.get("revision_of_model") != spec.model.revision:
            raise CatalogError(rel, "axolotl_config", "revision_of_model differs from the recipe's model.revision")
    if spec.dataset is not None and spec.dataset.id is not None:
        paths = {d.get("path") for d in config.get("datasets") or [] if isinstance(d, dict)}
        if spec.dataset.id not in paths:
            raise CatalogError(rel, "axolotl_config", f"datasets do not include the pinned dataset {spec.dataset.id}")


def _load_recipe(
    path: Path,
    rel: str,
    components: dict[str, Component],
    presets: dict[str, Preset],
    datasets: dict[str, DatasetEntry],
    rewards: dict[str, RewardFunction],
    suites: dict[str, Suite],
) -> Recipe:
    raw = path.read_bytes()
    data = _read_yaml(path, rel)
    try:
        spec = RecipeFile.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(rel, exc, RecipeFile) from exc
    if spec.name != path.stem:
        raise CatalogError(rel, "name", f"must equal the file name {path.stem!r}")
    component = components.get(spec.component)
    if component is None:
        raise CatalogError(
            rel,
            "component",
            f"no component {spec.component!r}{did_you_mean(closest(spec.component, list(components)))}",
        )
    spec = check_recipe(rel, spec, component, datasets, rewards, suites)
    kind = component_trainer(component)
    stray = not_applying(kind.name if kind is not None else CUSTOM, spec.alerts)
    if stray:
        raise CatalogError(rel, "alerts", f"{'; '.join(stray)}: {spec.component} does not log what they watch")
    if spec.preflight is not None:
        checker = components.get(spec.preflight.component)
        if checker is None:
            raise CatalogError(
                rel,
                "preflight.component",
                f"no component {spec.preflight.component!r}"
                f"{did_you_mean(closest(spec.preflight.component, list(components)))}",
            )
        if component.run_kind != "pytorchjob":
            raise CatalogError(rel, "preflight", "only a distributed (pytorchjob) recipe has a preflight")
    families: dict[str, str] = {}
    for name in spec.presets:
        if name not in presets:
            raise CatalogError(rel, "presets", f"no preset {name!r}{did_you_mean(closest(name, list(presets)))}")
        family = presets[name].family
        if family in families:
            raise CatalogError(rel, "presets", f"{families[family]} and {name} both set {family}: keep one")
        families[family] = name
    for key in spec.defaults:
        if key not in component.inputs:
            raise CatalogError(
                rel,
                f"defaults.{key}",
                f"not an input of component {component.name}{did_you_mean(closest(key, list(component.inputs)))}",
            )
        if key in PRESET_PARAMS or is_cluster_key(key):
            raise CatalogError(rel, f"defaults.{key}", "a cluster setting; it belongs in a preset")
        if key in PINNED_INPUTS:
            raise CatalogError(rel, f"defaults.{key}", "set from the recipe's pins (image, code, model, dataset, eval)")
    overrides: dict[str, OverrideSpec] = {}
    for key, decl in spec.overrides.items():
        try:
            parsed = parse_override_type(key, decl)
        except ValueError as exc:
            raise CatalogError(rel, f"overrides.{key}.type", str(exc)) from exc
        if is_cluster_key(key) or parsed.input in PRESET_PARAMS:
            raise CatalogError(rel, f"overrides.{key}", "a cluster setting cannot be a training override")
        if parsed.input in PINNED_INPUTS:
            raise CatalogError(
                rel, f"overrides.{key}", f"{parsed.input} is pinned by the recipe; it cannot be overridden"
            )
        if parsed.input not in component.inputs:
            raise CatalogError(
                rel, f"overrides.{key}.input", f"{parsed.input!r} is not an input of component {component.name}"
            )
        if parsed.input in spec.defaults:
            try:
                parsed.coerce(spec.defaults[parsed.input])
            except ValueError as exc:
                raise CatalogError(rel, f"defaults.{parsed.input}", f"the recipe's own default: {exc}") from exc
        overrides[key] = parsed
    if spec.eval is not None and spec.dataset is None and spec.eval.dataset is None and spec.code is None:
        raise CatalogError(rel, "eval.dataset", "needed when the recipe has neither a dataset nor code that makes one")
    refs: list[tuple[str, str | None, str | None]] = []
    if spec.model is not None:
        refs.append(("model", spec.model.path, spec.model.id))
    if spec.dataset is not None:
        refs.append(("dataset", spec.dataset.path, spec.dataset.id))
    if spec.eval is not None and spec.eval.dataset is not None:
        refs.append(("eval.dataset", spec.eval.dataset.path, spec.eval.dataset.id))
    if spec.code is not None:
        refs.append(("code", spec.code.path, spec.code.revision))
    for field, local, remote in refs:
        if (local is None) == (remote is None):
            what = "revision" if field == "code" else "id"
            raise CatalogError(rel, field, f"give either `path` (local, pinned by content digest) or `{what}`")
    axolotl_text = None
    if spec.axolotl_config is not None:
        config_path = (path.parent / spec.axolotl_config).resolve()
        if not config_path.is_file():
            raise CatalogError(rel, "axolotl_config", f"no file {spec.axolotl_config}")
        axolotl_text = config_path.read_text(encoding="utf-8")
        if "{{" in axolotl_text or "{%" in axolotl_text:
            raise CatalogError(
                rel,
                "axolotl_config",
                "contains Jinja (`{{`/`{%`), which Polyaxon would render; name a built-in chat_template",
            )
        _check_axolotl_pins(rel, spec, axolotl_text)
    return Recipe(
        name=spec.name,
        file=rel,
        path=path,
        hash="sha256:" + hashlib.sha256(raw).hexdigest(),
        spec=spec,
        overrides=overrides,
        axolotl_text=axolotl_text,
    )
