"""Compiling a serving check: a recipe's `serving:` section and a registered checkpoint in, one operation out.

The serving check loads a registered version the way the recipe's serving target would (engine, dtype, the
chat template of training), runs the prompt set pinned by digest, and writes its report; the bot judges the
budgets. Its environment is the serving section's presets (default: the recipe's), not the training run's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.catalog.digests import sha256_file
from bot.catalog.errors import PlanError
from bot.catalog.manifests import Component, Preset, Recipe, ServingSpec
from bot.catalog.pins import IMAGE_RE
from bot.catalog.plan import Plan
from bot.catalog.presets import presets_for_run
from bot.catalog.resources import summarize_resources
from bot.polyaxon.spec import OperationSpecError, compile_operation


def serving_spec(recipe: Recipe) -> ServingSpec:
    """The recipe's serving section, or a PlanError saying how to add one."""
    if recipe.spec.serving is None:
        raise PlanError(
            f"recipe {recipe.name} has no `serving:` section, so its models have no serving check and can't be "
            f"promoted: add one to {recipe.file} (engine, dtype, max_new_tokens, prompts: {{path, digest}}, budgets)"
        )
    return recipe.spec.serving


def spec_digest(spec: ServingSpec, image: str, component: Component) -> str:
    """What a passed serving check vouches for: engine, image, prompt set, budgets and the check's component."""
    payload = {"spec": spec.model_dump(mode="json"), "image": image, "component": component.name}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_prompt_set(spec: ServingSpec, repo_root: Path, where: str) -> Path:
    """The prompt set's file, refused when it is missing or its bytes are not the pinned digest."""
    path = Path(spec.prompts.path)
    full = path if path.is_absolute() else repo_root / path
    if not full.is_file():
        raise PlanError(f"{where}: the serving prompt set {spec.prompts.path} does not exist")
    actual = "sha256:" + sha256_file(full)
    if actual != spec.prompts.digest:
        raise PlanError(
            f"{where}: the serving prompt set {spec.prompts.path} changed: its pin is {spec.prompts.digest} but the "
            f"file is {actual}. Review the change and pin the new digest"
        )
    return full


def compile_serving_check(
    recipe: Recipe,
    components: Mapping[str, Component],
    presets: Mapping[str, Preset],
    *,
    checkpoint: str,
    model_run: str,
    repo_root: Path,
) -> tuple[Plan, str]:
    """The serving check's plan (kind `serving`) for `checkpoint`, and the digest of the spec it checks."""
    spec = serving_spec(recipe)
    component = components.get(spec.component)
    if component is None:
        raise PlanError(f"recipe {recipe.name} names serving component {spec.component}, which is not loaded")
    image = spec.image or recipe.spec.image or ""
    if not IMAGE_RE.match(image):
        raise PlanError(f"recipe {recipe.name}: the serving image {image or '(none)'} is not pinned by digest")
    check_prompt_set(spec, repo_root, f"recipe {recipe.file}")
    choice = presets_for_run(spec.presets, recipe, component, presets)
    origin = f"recipe {recipe.file} serving"
    values: dict[str, tuple[Any, str]] = {
        "image": (image, origin + (".image" if spec.image else ": the recipe's image")),
        "checkpoint": (checkpoint, "the registered version's checkpoint (its lineage path)"),
        "model_run": (model_run, "the run the version was registered from"),
        "prompts": (spec.prompts.path, origin + ".prompts.path"),
        "prompts_digest": (spec.prompts.digest, origin + ".prompts.digest"),
        "engine": (spec.engine, origin + ".engine"),
        "dtype": (spec.dtype, origin + ".dtype"),
        "max_new_tokens": (spec.max_new_tokens, origin + ".max_new_tokens"),
    }
    params: dict[str, Any] = component.defaults()
    provenance: dict[str, str] = dict.fromkeys(params, "component default")
    for name, (value, where) in values.items():
        if name in component.inputs:
            params[name], provenance[name] = value, where
    missing = component.unset(params)
    if missing:
        raise PlanError(f"serving component {component.name} has inputs the bot can't set: {', '.join(missing)}")
    try:
        operation = compile_operation(component.document, [p.document for p in choice.presets], params)
    except OperationSpecError as exc:
        raise PlanError(f"the serving check of {recipe.name}: {exc}") from exc
    plan = Plan(
        recipe=recipe.name,
        recipe_file=recipe.file,
        recipe_hash=recipe.hash,
        component=component.name,
        operation=operation,
        params=params,
        provenance=provenance,
        presets=[p.name for p in choice.presets],
        preset_sources=choice.sources,
        pins={"image": image, "prompt_set": spec.prompts.digest, "checkpoint": checkpoint},
        comparable=False,
        resources=summarize_resources(operation, component.run_kind, choice.presets),
        tags=[f"recipe:{recipe.name}", "serving-check", *[f"preset:{p.name}" for p in choice.presets]],
        kind="serving",
    )
    return plan, spec_digest(spec, image, component)
