"""The catalog: recipes (training choices), presets (cluster settings), components (polyaxonfiles).

`Catalog.load(dir)` reads and validates `manifests/`; `catalog.plan(cmd)` turns a parsed `run`
command into a `Plan`: the compiled, validated Polyaxon operation, the effective params and where
each came from, the pins (and the pin gate), the eval contract and its hash, the presets'
resources, warnings, and a preflight memory estimate. Pure apart from reading files (recipes,
presets, components, and the local model/dataset/code folders it pins by content digest); the
Polyaxon checker is reached through `bot.polyaxon.spec`.

Where things live:
    manifests.py   the schema of a recipe file, the catalog's types, the key sets
    overrides.py   the types and bounds of user overrides, and checking a command's overrides
    loading.py     reading and validating components, presets, datasets, reward functions and recipes
    formats.py     TRL's dataset formats, which each trainer takes, telling one from columns
    datasets.py    the catalog's datasets (`datasets/NAME.yaml`), verified against their rows
    rewards.py     the reward functions GRPO and RLOO may name (`rewards.yaml`)
    trainers.py    what the catalog knows of each TRL trainer: eval procedure, rewards, reference model
    choices.py     a recipe's trainer, dataset and rewards checked at load; `dataset=`/`rewards=` per run
    presets.py     what a preset may hold, and which presets a run gets, in order
    pins.py        pinning image, code, model, dataset and the eval contract (the pin gate's input)
    digests.py     content digests of local files and of the eval contract
    resources.py   what the merged presets ask of the cluster, its provenance, resource warnings
    memory.py      the preflight memory estimate
    plan.py        `Plan` and the compile step
    gate.py        the smoke-first gate: a distributed run waits for a passed preflight (pure decisions)
    preflight.py   compiling a preflight from a distributed run's plan
    sweep.py       compiling a sweep: its space checked against the recipe, one matrix operation
    contract.py    which metric of an eval contract ranks runs
    cost.py        what a run holds while running and what an hour costs (presets, pricing.yaml)
    catalog.py     `Catalog`: load, lookups, `plan`
    check.py       `finetune-bot manifests check`
"""

from bot.catalog.catalog import Catalog
from bot.catalog.check import check_catalog
from bot.catalog.cost import CostProfile, Pricing
from bot.catalog.digests import content_digest, eval_contract_hash, sha256_file
from bot.catalog.errors import CatalogError, PlanError
from bot.catalog.gate import GateVerdict, PassedPreflight, check_gate, preflight_command
from bot.catalog.manifests import Component, InputSpec, Preset, Recipe, RecipeFile
from bot.catalog.memory import MemoryEstimate
from bot.catalog.overrides import OverrideSpec
from bot.catalog.plan import Plan
from bot.catalog.sweep import SweepPlan, SweptKey

__all__ = [
    "Catalog",
    "CatalogError",
    "Component",
    "CostProfile",
    "GateVerdict",
    "InputSpec",
    "MemoryEstimate",
    "OverrideSpec",
    "PassedPreflight",
    "Plan",
    "PlanError",
    "Preset",
    "Pricing",
    "Recipe",
    "RecipeFile",
    "SweepPlan",
    "SweptKey",
    "check_catalog",
    "check_gate",
    "content_digest",
    "eval_contract_hash",
    "preflight_command",
    "sha256_file",
]
