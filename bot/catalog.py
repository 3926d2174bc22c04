"""The catalog: recipes (training choices), presets (cluster settings), components (polyaxonfiles).

`Catalog.load(dir)` reads and validates `manifests/`; `catalog.plan(cmd)` turns a parsed `run`
command into a `Plan`: the compiled, validated Polyaxon operation, the effective params and where
each came from, the pins (and the pin gate), the eval contract and its hash, the presets'
resources, warnings, and a preflight memory estimate. Pure apart from reading files (recipes,
presets, components, and the local model/dataset/code folders it pins by content digest); the
Polyaxon checker is reached through `bot.polyaxon.spec`.

Layout (paths in recipes are relative to the repository root, the catalog folder's parent):
    manifests/components/NAME.yaml   Polyaxon V1 components (`kind: component`)
    manifests/presets/NAME.yaml      Polyaxon presets (`kind: operation`, `isPreset: true`) plus
                                     `name` and a one-line `description` (removed before merging)
    manifests/recipes/NAME.yaml      recipes, see `RecipeFile`
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.grammar import CommandError, RunCommand, Scalar, closest, did_you_mean, is_cluster_key, is_plain_value
from bot.memory import GIB, MemoryEstimate, ModelConfigError, ModelShape, estimate_training_memory, shape_from_config
from bot.polyaxon.spec import OperationSpecError, compile_operation

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*(?::[0-9]+)?/[a-z0-9._/\-]+@sha256:[0-9a-f]{64}$")
DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")  # trainer.data.DATA_SUFFIXES
GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_ANNOTATION = "finetune.io/gpu-memory-gib"
TRL_COMPONENTS = ("trl-sft", "trl-sft-distributed")
# Component inputs a preset may set: placement, not training.
PRESET_PARAMS = frozenset({"checkpoints_connection"})
# Inputs the catalog derives from the recipe's pins and contract: neither `defaults` nor an
# override may set them, or they would bypass the pin gate.
PINNED_INPUTS = frozenset(
    {
        "image",
        "config",
        "model_name_or_path",
        "model_revision",
        "dataset_name",
        "dataset_revision",
        "dataset_digest",
        "dataset_split",
        "code_revision",
        "recipe_name",
        "recipe_hash",
        "eval_dataset_name",
        "eval_dataset_revision",
        "eval_split",
        "eval_max_samples",
        "eval_metrics",
        "eval_procedure_version",
        "eval_seed",
        "eval_contract_hash",
    }
)
PRESET_KEYS = frozenset(
    {
        "name",
        "description",
        "kind",
        "version",
        "isPreset",
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
_INTERVAL_RE = re.compile(
    r"^(?P<type>int|float)\s*(?:in\s*(?P<lo_br>[\[(])\s*(?P<lo>[^,\s]+)\s*,\s*(?P<hi>[^\])\s]+)\s*(?P<hi_br>[\])])"
    r"|(?P<lo2>[-+0-9.eE]+)\s*\.\.\s*(?P<hi2>[-+0-9.eE]+))?$"
)
_CHOICE_RE = re.compile(r"^choice\s+(?P<choices>[A-Za-z0-9_.\-]+(?:\s*\|\s*[A-Za-z0-9_.\-]+)*)$")


class CatalogError(Exception):
    """A manifest is malformed; the message names the file and the field."""

    def __init__(self, file: str, field: str, message: str) -> None:
        super().__init__(f"{file}: {field}: {message}")
        self.file = file
        self.field = field
        self.message = message


class PlanError(CommandError):
    """A `run` command does not fit the catalog (names, keys, types, bounds, pins)."""


# --- manifest models ---------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelRef(_Strict):
    """`model:` of a recipe: a hub id + commit, or a local folder pinned by its content digest."""

    id: str | None = None
    revision: str | None = None
    path: str | None = None
    build: str | None = Field(default=None, description="Command that builds a missing local model.")
    config: dict[str, Any] | None = Field(default=None, description="config.json numbers, for the memory estimate.")


class DatasetRef(_Strict):
    """`dataset:` of a recipe: a hub id + commit + content digest, or a local folder/file."""

    id: str | None = None
    revision: str | None = None
    digest: str | None = None
    path: str | None = None
    split: str = "train"
    text_field: str | None = None
    build: str | None = None


class CodeRef(_Strict):
    """`code:` of a recipe: a git commit of the training code, or a local folder pinned by digest."""

    revision: str | None = None
    path: str | None = None


class EvalSpec(_Strict):
    """`eval:` of a recipe: the fixed evaluation contract (trainer.evaluation)."""

    dataset: DatasetRef | None = None  # default: the training dataset
    split: str = "eval"
    max_samples: int = Field(default=0, ge=0)
    metrics: list[str] = Field(min_length=1)
    procedure_version: str = "v1"
    seed: int = 0


class OverrideDecl(_Strict):
    """One user-overridable key: the component input it sets and its type with bounds."""

    input: str | None = None  # default: the key itself
    type: str
    help: str | None = None


class RecipeFile(_Strict):
    """The schema of `manifests/recipes/NAME.yaml`."""

    name: str
    description: str
    component: str
    image: str | None = None
    code: CodeRef | None = None
    model: ModelRef | None = None
    dataset: DatasetRef | None = None
    eval: EvalSpec | None = None
    exploration: bool = False
    presets: list[str] = Field(default_factory=list)
    defaults: dict[str, Scalar] = Field(default_factory=dict)
    overrides: dict[str, OverrideDecl] = Field(default_factory=dict)
    axolotl_config: str | None = None


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

    def coerce(self, value: Scalar) -> Scalar:
        """Check type and bounds of a command-line value; return it typed, or raise ValueError."""
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
                if not value.is_integer():
                    raise ValueError(f"expected a whole number ({self.describe()}), got {value!r}")
                value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"expected a finite number ({self.describe()})")
        self._check_bounds(value)
        return value

    def _check_bounds(self, value: float) -> None:
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if too_low or too_high:
            raise ValueError(f"{_fmt(value, self.type)} is out of bounds: {self.describe()}")


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


class InputSpec(BaseModel):
    """One input of a component."""

    name: str
    type: str
    value: Any = None
    optional: bool = False


class Component(BaseModel):
    """A Polyaxon component file."""

    name: str
    file: str
    description: str
    run_kind: str
    inputs: dict[str, InputSpec]
    document: dict[str, Any]


class Preset(BaseModel):
    """A Polyaxon preset file plus its catalog metadata."""

    name: str
    file: str
    description: str
    document: dict[str, Any]  # what Polyaxon merges (without name/description)
    target_kind: str | None  # "job", "pytorchjob", or None for any run kind
    params: dict[str, Any] = Field(default_factory=dict)


class Recipe(BaseModel):
    """A recipe file: training choices and pins."""

    name: str
    file: str
    path: Path
    hash: str
    spec: RecipeFile
    overrides: dict[str, OverrideSpec]
    axolotl_text: str | None = None

    @property
    def description(self) -> str:
        """The recipe's one-line description."""
        return self.spec.description


class Plan(BaseModel):
    """A compiled run: what `--dry-run` shows and what the gateway submits."""

    recipe: str
    recipe_file: str
    recipe_hash: str
    component: str
    operation: dict[str, Any]
    params: dict[str, Any]
    provenance: dict[str, str]
    presets: list[str]
    pins: dict[str, str]
    comparable: bool
    unpinned: list[str] = Field(default_factory=list)
    eval_contract: dict[str, Any] = Field(default_factory=dict)
    eval_contract_hash: str = ""
    resources: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    memory: MemoryEstimate | None = None
    tags: list[str] = Field(default_factory=list)
    dry_run: bool = False


# --- digests -----------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _content_files(path: Path, suffixes: tuple[str, ...] | None) -> list[Path]:
    if path.is_file():
        return [path]
    files = []
    for candidate in path.rglob("*"):
        if not candidate.is_file() or "__pycache__" in candidate.parts:
            continue
        if suffixes is not None and candidate.suffix not in suffixes:
            continue
        files.append(candidate)
    return sorted(files)


def content_digest(path: Path, suffixes: tuple[str, ...] | None = None, cache: dict[Any, str] | None = None) -> str:
    """`sha256:<hex>` over `<sha256 of file>  <relative path>\\n` lines (sha256sum format) of a file or folder.

    With `suffixes=DATA_SUFFIXES` this is exactly `trainer.data.dataset_digest`, which the trainer
    verifies for local data.
    """
    root = path if path.is_dir() else path.parent
    lines = []
    for file in _content_files(path, suffixes):
        stat = file.stat()
        key = (str(file), stat.st_size, stat.st_mtime_ns)
        if cache is not None and key in cache:
            file_hash = cache[key]
        else:
            file_hash = sha256_file(file)
            if cache is not None:
                cache[key] = file_hash
        lines.append(f"{file_hash}  {file.relative_to(root).as_posix()}\n")
    return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def eval_contract_hash(fields: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of the canonical JSON of the contract fields (same as `trainer.evaluation.contract_hash`)."""
    canonical = dict(fields)
    canonical["metrics"] = sorted(set(canonical["metrics"]))
    payload = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


# --- loading -----------------------------------------------------------------------------------


def _read_yaml(path: Path, rel: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CatalogError(rel, "(file)", f"not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(rel, "(file)", "expected a mapping at the top level")
    return data


def _validation_error(rel: str, exc: ValidationError) -> CatalogError:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(file)"
    return CatalogError(rel, field, first["msg"])


def _walk_keys(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path, str(key)
            yield from _walk_keys(value, path)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk_keys(item, f"{prefix}[{index}]")


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


def _load_preset(path: Path, rel: str, training_keys: frozenset[str]) -> Preset:
    data = _read_yaml(path, rel)
    if data.get("name") != path.stem:
        raise CatalogError(rel, "name", f"must equal the file name {path.stem!r}")
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
    document = {key: value for key, value in data.items() if key not in ("name", "description")}
    return Preset(
        name=data["name"],
        file=rel,
        description=description.strip(),
        document=document,
        target_kind=target,
        params=params,
    )


def _check_axolotl_pins(rel: str, spec: RecipeFile, text: str) -> None:
    """The Axolotl config must train the model (and revision) the recipe pins."""
    try:
        config = yaml.safe_load(text)
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


def _load_recipe(path: Path, rel: str, components: dict[str, Component], presets: dict[str, Preset]) -> Recipe:
    raw = path.read_bytes()
    data = _read_yaml(path, rel)
    try:
        spec = RecipeFile.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(rel, exc) from exc
    if spec.name != path.stem:
        raise CatalogError(rel, "name", f"must equal the file name {path.stem!r}")
    component = components.get(spec.component)
    if component is None:
        raise CatalogError(
            rel,
            "component",
            f"no component {spec.component!r}{did_you_mean(closest(spec.component, list(components)))}",
        )
    for name in spec.presets:
        if name not in presets:
            raise CatalogError(rel, "presets", f"no preset {name!r}{did_you_mean(closest(name, list(presets)))}")
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
    if spec.eval is not None and spec.dataset is None and spec.eval.dataset is None:
        raise CatalogError(rel, "eval.dataset", "needed when the recipe has no dataset")
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


# --- the catalog -------------------------------------------------------------------------------


class Catalog:
    """Recipes, presets and components loaded from a catalog folder."""

    def __init__(
        self,
        root: Path,
        components: dict[str, Component],
        presets: dict[str, Preset],
        recipes: dict[str, Recipe],
    ) -> None:
        self.root = root
        self.repo_root = root.parent
        self.components = components
        self.presets = presets
        self.recipes = recipes
        self._digests: dict[Any, str] = {}

    @classmethod
    def load(cls, catalog_dir: Path) -> Catalog:
        """Read and validate every manifest; raise `CatalogError` naming the file and field."""
        root = Path(catalog_dir)
        components: dict[str, Component] = {}
        for path in sorted((root / "components").glob("*.yaml")):
            component = _load_component(path, path.relative_to(root).as_posix())
            components[component.name] = component
        training_keys = frozenset(
            name for component in components.values() for name in component.inputs if name not in PRESET_PARAMS
        ) - {"image"}
        presets: dict[str, Preset] = {}
        for path in sorted((root / "presets").glob("*.yaml")):
            preset = _load_preset(path, path.relative_to(root).as_posix(), training_keys)
            presets[preset.name] = preset
        recipes: dict[str, Recipe] = {}
        for path in sorted((root / "recipes").glob("*.yaml")):
            recipe = _load_recipe(path, path.relative_to(root).as_posix(), components, presets)
            recipes[recipe.name] = recipe
        if not recipes:
            raise CatalogError("recipes/", "(folder)", "no recipes found")
        return cls(root, components, presets, recipes)

    # -- lookups --

    def recipe(self, name: str) -> Recipe:
        """The recipe called `name`, or a `PlanError` with the closest names."""
        if name in self.recipes:
            return self.recipes[name]
        suggestions = closest(name, list(self.recipes))
        raise PlanError(
            f"no recipe {name!r}{did_you_mean(suggestions)} (see /finetune recipes)", suggestions=suggestions
        )

    def preset(self, name: str) -> Preset:
        """The preset called `name`, or a `PlanError` with the closest names."""
        if name in self.presets:
            return self.presets[name]
        suggestions = closest(name, list(self.presets))
        raise PlanError(
            f"no preset {name!r}{did_you_mean(suggestions)} (see /finetune presets)", suggestions=suggestions
        )

    # -- planning --

    def plan(self, cmd: RunCommand, *, require_local: bool = True) -> Plan:
        """Compile a `run` command into a validated, pinned `Plan`, or raise `PlanError`.

        With `require_local=False` (used by `manifests check`) a missing local model or dataset
        does not fail the plan: its pin reads `unbuilt` and a warning says how to build it.
        """
        recipe = self.recipe(cmd.recipe)
        spec = recipe.spec
        component = self.components[spec.component]
        preset_names = list(cmd.presets) or list(spec.presets)
        presets = [self.preset(name) for name in preset_names]
        for preset in presets:
            if preset.target_kind is not None and preset.target_kind != component.run_kind:
                fitting = sorted(p.name for p in self.presets.values() if p.target_kind in (None, component.run_kind))
                raise PlanError(
                    f"preset {preset.name} is for {preset.target_kind} components, but recipe {recipe.name} uses "
                    f"{component.name} ({component.run_kind}); presets that fit: {', '.join(fitting)}",
                    suggestions=fitting,
                )
        # The user's keys, types and bounds are checked before anything reads the disk.
        command_line: dict[str, Scalar] = {}
        for key, value in cmd.overrides.items():
            override = self._override(recipe, component, key)
            try:
                command_line[override.input] = override.coerce(value)
            except ValueError as exc:
                raise PlanError(f"{key}={value}: {exc}") from None
        warnings: list[str] = []
        source = f"recipe {recipe.file}"
        params: dict[str, Any] = {}
        provenance: dict[str, str] = {}

        def put(name: str, value: Any, origin: str) -> None:
            if name in component.inputs:
                if component.inputs[name].type == "float" and isinstance(value, int) and not isinstance(value, bool):
                    value = float(value)
                params[name] = value
                provenance[name] = origin

        for name, item in component.inputs.items():
            if item.value is not None or item.optional:
                put(name, item.value, "component default")

        pins, unpinned = self._pins(recipe, component, put, warnings, require_local)
        if recipe.axolotl_text is not None:
            put("config", recipe.axolotl_text, f"recipe {recipe.spec.axolotl_config} (verbatim)")
        for name, value in spec.defaults.items():
            put(name, value, source)
        for preset in presets:
            for name, param in preset.params.items():
                put(name, param.get("value") if isinstance(param, dict) else param, f"preset {preset.name}")
        for name, value in command_line.items():
            put(name, value, "command line")

        comparable = not unpinned
        if unpinned and not spec.exploration:
            raise PlanError(
                f"recipe {recipe.name} is not pinned: {'; '.join(unpinned)}. Pin them in {recipe.file}, "
                "or set `exploration: true` there to allow non-comparable runs"
            )
        if unpinned:
            warnings.append("non-comparable (exploration): " + "; ".join(unpinned))

        contract, contract_hash = self._eval_contract(recipe, pins, put)
        put("recipe_name", recipe.name, source)
        put("recipe_hash", recipe.hash, f"computed: sha256 of {recipe.file}")
        missing = [name for name, item in component.inputs.items() if name not in params and not item.optional]
        if missing:
            raise PlanError(
                f"recipe {recipe.name} leaves required inputs of {component.name} unset: {', '.join(missing)}"
            )

        try:
            operation = compile_operation(component.document, [p.document for p in presets], params)
        except OperationSpecError as exc:
            raise PlanError(f"{recipe.name} with presets {', '.join(preset_names) or '(none)'}: {exc}") from exc
        resources = summarize_resources(operation, component.run_kind, presets)
        provenance.update(cluster_provenance(presets))
        warnings.extend(_resource_warnings(component, resources, params, preset_names))
        memory = self._memory(recipe, component, params, resources)
        if memory is not None and memory.fits is False:
            warnings.append(
                f"preflight memory: {memory.summary()}. Try use_peft=true (LoRA), a smaller "
                "per_device_train_batch_size or max_length, or a bigger preset"
            )
        tags = [f"recipe:{recipe.name}", *[f"preset:{name}" for name in preset_names]]
        tags.append("comparable" if comparable else "non-comparable")
        return Plan(
            recipe=recipe.name,
            recipe_file=recipe.file,
            recipe_hash=recipe.hash,
            component=component.name,
            operation=operation,
            params=params,
            provenance=provenance,
            presets=preset_names,
            pins=pins,
            comparable=comparable,
            unpinned=unpinned,
            eval_contract=contract,
            eval_contract_hash=contract_hash,
            resources=resources,
            warnings=warnings,
            memory=memory,
            tags=tags,
            dry_run=cmd.dry_run,
        )

    def _override(self, recipe: Recipe, component: Component, key: str) -> OverrideSpec:
        if key in recipe.overrides:
            return recipe.overrides[key]
        by_input = {spec.input: spec for spec in recipe.overrides.values()}
        if key in by_input:
            return by_input[key]
        names = sorted(recipe.overrides)
        suggestions = closest(key, names + sorted(by_input))
        keys = ", ".join(f"{name} ({recipe.overrides[name].describe()})" for name in names) or "none"
        if key in component.inputs:
            raise PlanError(f"{key} is fixed by recipe {recipe.name}; it may override: {keys}", suggestions=suggestions)
        raise PlanError(
            f"recipe {recipe.name} has no key {key!r}{did_you_mean(suggestions)} (keys: {keys})",
            suggestions=suggestions,
        )

    def missing_local_builds(self) -> list[str]:
        """Build commands of local models and datasets that recipes name but that are not built yet."""
        builds: dict[str, None] = {}
        for recipe in self.recipes.values():
            for ref in (recipe.spec.model, recipe.spec.dataset):
                if ref is None or ref.path is None or ref.build is None:
                    continue
                path = Path(ref.path)
                if not (path if path.is_absolute() else self.repo_root / path).exists():
                    builds[ref.build] = None
        return list(builds)

    def _local(self, written: str, what: str, build: str | None, require: bool) -> tuple[Path | None, str]:
        """Resolve a recipe's local path; (None, reason) when it is missing and not required."""
        path = Path(written)
        resolved = path if path.is_absolute() else self.repo_root / path
        if resolved.exists():
            return resolved, ""
        how = f": build it with `{build}`" if build else ""
        if require:
            raise PlanError(f"{what} {written} is missing{how}")
        return None, f"{what} {written} is not built{how} (digest computed at run time)"

    def _pins(
        self, recipe: Recipe, component: Component, put: Any, warnings: list[str], require: bool
    ) -> tuple[dict[str, str], list[str]]:
        spec, source = recipe.spec, f"recipe {recipe.file}"
        pins: dict[str, str] = {"recipe": recipe.hash}
        unpinned: list[str] = []
        if spec.image is not None:
            pins["image"] = spec.image
            if not IMAGE_RE.match(spec.image):
                unpinned.append(f"image {spec.image} is a floating tag, not a digest (repo@sha256:...)")
            put("image", spec.image, source)
        elif "image" in component.inputs:
            unpinned.append("no image")
        if spec.code is not None:
            if spec.code.path is not None:
                path, missing = self._local(spec.code.path, "code", None, require)
                pins["code"] = content_digest(path, (".py",), self._digests) if path else "unbuilt"
                if missing:
                    warnings.append(missing)
                put("code_revision", pins["code"], f"computed: sha256 of {spec.code.path} (Python files)")
            else:
                pins["code"] = spec.code.revision or ""
                if not SHA_RE.match(pins["code"]):
                    unpinned.append(f"code revision {pins['code']!r} is not a commit sha")
                put("code_revision", pins["code"], source)
        else:
            unpinned.append("no code revision")
        model = spec.model
        if model is not None:
            if model.path is not None:
                path, missing = self._local(model.path, "model", model.build, require)
                pins["model"] = (
                    f"{model.path}@{content_digest(path, None, self._digests)}" if path else f"{model.path}@unbuilt"
                )
                if missing:
                    warnings.append(missing)
                put("model_name_or_path", model.path, source)
            else:
                revision = model.revision or "main"
                pins["model"] = f"{model.id}@{revision}"
                if not SHA_RE.match(revision):
                    unpinned.append(f"model revision {revision!r} of {model.id} is a branch or tag, not a commit sha")
                put("model_name_or_path", model.id, source)
                put("model_revision", revision, source)
        if spec.dataset is not None:
            pins["dataset"] = self._pin_dataset(
                spec.dataset, "dataset", "dataset", put, source, unpinned, warnings, require
            )
            put("dataset_split", spec.dataset.split, source)
            if spec.dataset.text_field:
                put("dataset_text_field", spec.dataset.text_field, source)
        return pins, unpinned

    def _pin_dataset(
        self,
        ref: DatasetRef,
        prefix: str,
        what: str,
        put: Any,
        source: str,
        unpinned: list[str],
        warnings: list[str],
        require: bool,
    ) -> str:
        """Pin a dataset; return `name@revision+digest` and set the `{prefix}_*` inputs."""
        if ref.path is not None:
            path, missing = self._local(ref.path, what, ref.build, require)
            if path is None:
                warnings.append(missing)
                digest = "unbuilt"
            else:
                digest = content_digest(path, DATA_SUFFIXES, self._digests)
                if ref.digest and ref.digest != digest:
                    raise PlanError(f"{what} {ref.path} changed: its digest is {digest}, the recipe pins {ref.digest}")
            put(f"{prefix}_name", ref.path, source)
            if prefix == "dataset":
                put("dataset_digest", digest if digest != "unbuilt" else "", f"computed: sha256 of {ref.path}")
            return f"{ref.path}@{digest}"
        revision = ref.revision or "main"
        if not SHA_RE.match(revision):
            unpinned.append(f"{what} revision {revision!r} of {ref.id} is a branch or tag, not a commit sha")
        if not ref.digest or not DIGEST_RE.match(ref.digest):
            unpinned.append(f"{what} {ref.id} has no content digest (sha256:...)")
        put(f"{prefix}_name", ref.id, source)
        put(f"{prefix}_revision", revision, source)
        if prefix == "dataset":
            put("dataset_digest", ref.digest or "", source)
        return f"{ref.id}@{revision}+{ref.digest or 'no-digest'}"

    def _eval_contract(self, recipe: Recipe, pins: dict[str, str], put: Any) -> tuple[dict[str, Any], str]:
        spec = recipe.spec.eval
        if spec is None:
            return {}, ""
        source = f"recipe {recipe.file}"
        ref = spec.dataset or recipe.spec.dataset
        assert ref is not None  # checked at load
        if ref.path is not None:
            name = ref.path
            if spec.dataset is None and "dataset" in pins:
                revision = pins["dataset"].rsplit("@", 1)[1]  # the training data's digest
            else:
                path, _ = self._local(ref.path, "eval dataset", ref.build, False)
                revision = content_digest(path, DATA_SUFFIXES, self._digests) if path else "unbuilt"
        else:
            name, revision = ref.id or "", ref.revision or "main"
        fields = {
            "dataset": name,
            "revision": revision,
            "split": spec.split,
            "max_samples": spec.max_samples,
            "metrics": sorted(set(spec.metrics)),
            "procedure_version": spec.procedure_version,
            "seed": spec.seed,
        }
        digest = eval_contract_hash(fields)
        put("eval_dataset_name", name, source)
        put("eval_dataset_revision", revision, source)
        put("eval_split", spec.split, source)
        put("eval_max_samples", spec.max_samples, source)
        put("eval_metrics", ",".join(spec.metrics), source)
        put("eval_procedure_version", spec.procedure_version, source)
        put("eval_seed", spec.seed, source)
        put("eval_contract_hash", digest, "computed: eval contract")
        pins["eval_contract"] = digest
        return fields, digest

    def _memory(
        self, recipe: Recipe, component: Component, params: dict[str, Any], resources: dict[str, Any]
    ) -> MemoryEstimate | None:
        model = recipe.spec.model
        if model is None or component.name not in TRL_COMPONENTS:
            return None
        config: Mapping[str, Any] | None = model.config
        if config is None and model.path is not None:
            config_file = (
                (self.repo_root / model.path / "config.json")
                if not Path(model.path).is_absolute()
                else Path(model.path) / "config.json"
            )
            if config_file.is_file():
                config = json.loads(config_file.read_text(encoding="utf-8"))
        if config is None:
            return None
        try:
            shape: ModelShape = shape_from_config(config)
        except ModelConfigError:
            return None
        gpus = int(resources.get("gpus_per_replica") or 0)
        device = "gpu" if gpus else "cpu"
        budget: int | None = None
        budget_source: str | None = None
        if device == "gpu" and resources.get("gpu_memory_gib"):
            budget = int(float(resources["gpu_memory_gib"]) * GIB)
            budget_source = f"GPU memory of {resources.get('gpu_memory_source') or 'the preset'}"
        elif device == "cpu" and resources.get("memory_limit_bytes"):
            budget = int(resources["memory_limit_bytes"])
            budget_source = "memory limit of the preset"
        try:
            return estimate_training_memory(
                shape,
                dtype=str(params.get("dtype", "float32")),
                use_peft=bool(params.get("use_peft", False)),
                lora_r=int(params.get("lora_r", 16)),
                lora_target_modules=str(params.get("lora_target_modules", "all-linear")),
                batch_size=int(params.get("per_device_train_batch_size", 8)),
                seq_len=int(params.get("max_length", 1024)),
                optim=str(params.get("optim", "adamw_torch")),
                gradient_checkpointing=bool(params.get("gradient_checkpointing", False)),
                mixed_precision=bool(params.get("bf16", False)),
                distributed=component.run_kind == "pytorchjob",
                device=device,
                budget_bytes=budget,
                budget_source=budget_source,
            )
        except ModelConfigError:
            return None


# --- resources and provenance of cluster settings ----------------------------------------------

_QUANTITY_RE = re.compile(r"^([0-9.]+)([KMGTPE]i?|[kmgtpe])?$")
_QUANTITY_FACTORS = {
    None: 1,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "K": 1000,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
}


def quantity_bytes(value: Any) -> int | None:
    """Bytes of a Kubernetes memory quantity (`4Gi`, `512Mi`, `1000000`), or None."""
    match = _QUANTITY_RE.match(str(value))
    if not match or match.group(2) not in _QUANTITY_FACTORS:
        return None
    return int(float(match.group(1)) * _QUANTITY_FACTORS[match.group(2)])


def _replica_summary(patch: Mapping[str, Any]) -> dict[str, Any]:
    container = patch.get("container") or {}
    environment = patch.get("environment") or {}
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    gpus = limits.get(GPU_RESOURCE, requests.get(GPU_RESOURCE, 0))
    return {
        "requests": requests,
        "limits": limits,
        "gpus": int(gpus or 0),
        "node_selector": environment.get("nodeSelector") or {},
        "tolerations": environment.get("tolerations") or [],
        "gpu_memory_gib": (environment.get("annotations") or {}).get(GPU_MEMORY_ANNOTATION),
    }


def summarize_resources(operation: Mapping[str, Any], run_kind: str, presets: list[Preset]) -> dict[str, Any]:
    """What the merged presets ask of the cluster: queue, replicas, GPUs, requests/limits, placement."""
    patch = operation.get("runPatch") or {}
    summary: dict[str, Any] = {"run_kind": run_kind, "queue": operation.get("queue")}
    if run_kind == "pytorchjob":
        run = (operation.get("component") or {}).get("run") or {}
        replicas = {}
        for role in ("master", "worker"):
            merged = {**(run.get(role) or {}), **(patch.get(role) or {})}
            replicas[role] = {"replicas": int(merged.get("replicas") or 0), **_replica_summary(patch.get(role) or {})}
        first = replicas["master"]
        summary.update(
            {
                "replicas": sum(r["replicas"] for r in replicas.values()),
                "replica_specs": replicas,
                "gpus_per_replica": first["gpus"],
                "gpus_total": sum(r["replicas"] * r["gpus"] for r in replicas.values()),
            }
        )
        details = first
    else:
        details = _replica_summary(patch)
        summary.update({"replicas": 1, "gpus_per_replica": details["gpus"], "gpus_total": details["gpus"]})
    summary.update(
        {
            "requests": details["requests"],
            "limits": details["limits"],
            "node_selector": details["node_selector"],
            "tolerations": details["tolerations"],
            "gpu_memory_gib": details["gpu_memory_gib"],
            "memory_limit_bytes": quantity_bytes(details["limits"].get("memory"))
            if details["limits"].get("memory")
            else None,
            "max_retries": (operation.get("termination") or {}).get("maxRetries"),
        }
    )
    memory_sources = [p.name for p in presets if GPU_MEMORY_ANNOTATION in json.dumps(p.document)]
    summary["gpu_memory_source"] = memory_sources[-1] if memory_sources else None
    return summary


_PROVENANCE_LEAVES = frozenset(
    {"resources", "nodeSelector", "tolerations", "affinity", "annotations", "labels", "replicas"}
)


def _cluster_fields(node: Any, prefix: str) -> Iterator[str]:
    if not isinstance(node, dict):
        yield prefix
        return
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key in _PROVENANCE_LEAVES or not isinstance(value, dict):
            yield path
        else:
            yield from _cluster_fields(value, path)


def cluster_provenance(presets: list[Preset]) -> dict[str, str]:
    """Cluster field (`runPatch.container.resources`, `queue`, ...) -> the presets that set it, in order."""
    origin: dict[str, list[str]] = {}
    for preset in presets:
        for key in ("queue", "termination", "runPatch", "namespace"):
            if key in preset.document:
                for field in _cluster_fields(preset.document[key], key):
                    origin.setdefault(field, []).append(f"preset {preset.name}")
    return {field: ", ".join(names) for field, names in origin.items()}


def _resource_warnings(
    component: Component, resources: Mapping[str, Any], params: Mapping[str, Any], preset_names: list[str]
) -> list[str]:
    warnings = []
    gpus = int(resources.get("gpus_per_replica") or 0)
    if component.run_kind == "job" and gpus > 1:
        warnings.append(
            f"presets {', '.join(preset_names)} ask for {gpus} GPUs on {component.name}, a single-process `job` "
            "component: adding GPU requests alone does not distribute a single-process training script — "
            "use trl-sft-distributed"
        )
    if gpus == 0 and params.get("bf16") is True:
        warnings.append("bf16=true on a CPU-only preset: bf16 training needs a GPU here; set bf16=false")
    if gpus and component.name in TRL_COMPONENTS and params.get("dtype") == "float32" and not params.get("bf16"):
        warnings.append("training in float32 on a GPU: bf16=true with dtype=bfloat16 halves memory and is faster")
    return warnings


# --- manifests check ---------------------------------------------------------------------------


def check_catalog(catalog_dir: Path) -> list[str]:
    """Compile every recipe x preset pair (and each recipe's default presets) with Polyaxon's checker.

    Returns the problems (empty = all good). A local model/dataset that is not built does not count
    as a problem. Pairs of a preset and a component of another run kind must be refused by the
    plan (with a clear error); that they are is checked too.
    """
    try:
        catalog = Catalog.load(Path(catalog_dir))
    except CatalogError as exc:
        return [str(exc)]
    problems: list[str] = []
    for recipe in catalog.recipes.values():
        kind = catalog.components[recipe.spec.component].run_kind
        combos: list[list[str]] = [list(recipe.spec.presets)] + [[name] for name in catalog.presets]
        for names in combos:
            label = f"{recipe.name} x {','.join(names) or '(no preset)'}"
            incompatible = any(catalog.presets[n].target_kind not in (None, kind) for n in names)
            try:
                catalog.plan(RunCommand(recipe=recipe.name, presets=names), require_local=False)
            except PlanError as exc:
                if not incompatible:
                    problems.append(f"{label}: {exc.message}")
                continue
            if incompatible:
                problems.append(f"{label}: a preset for another run kind was accepted")
    return problems
