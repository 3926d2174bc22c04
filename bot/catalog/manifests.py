"""What the manifests hold: the schema of a recipe file, the catalog's types, and the key sets.

Layout (paths in recipes are relative to the repository root, the catalog folder's parent):
    manifests/components/NAME.yaml   Polyaxon V1 components (`kind: component`)
    manifests/presets/NAME.yaml      Polyaxon presets (`kind: operation`, `isPreset: true`) plus
                                     `name` and a one-line `description` (removed before merging)
    manifests/recipes/NAME.yaml      recipes, see `RecipeFile`

Reading and validating the files is `loading.py` (and `presets.py` for what a preset may hold).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.catalog.alerts import AlertsSpec
from bot.catalog.overrides import OverrideSpec
from bot.catalog.policy import RetrySpec, duration_s
from bot.grammar import Scalar

TRL_COMPONENTS = ("trl-sft", "trl-sft-distributed", "trl-dpo", "trl-kto", "trl-reward", "trl-grpo", "trl-rloo")
# Component inputs a preset may set: placement and how GRPO/RLOO generate (vLLM), not training.
PRESET_PARAMS = frozenset(
    {
        "checkpoints_connection",
        "use_vllm",
        "vllm_mode",
        "vllm_gpu_memory_utilization",
        "vllm_server_host",
        "vllm_server_port",
    }
)
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
        # A harness suite's contract (bot.catalog.harness): from the recipe's `eval.suite` or `/finetune eval`.
        "eval_harness",
        "eval_harness_version",
        "eval_tasks",
        "eval_tasks_dir",
        "eval_num_fewshot",
        "eval_limit",
        "eval_chat_template",
        # What an evaluation run evaluates (a run or a registered version): only `/finetune eval` sets it.
        "subject",
        # GRPO and RLOO: chosen by name from the catalog's reward functions (the recipe's `rewards`, or `rewards=`).
        "reward_funcs",
        # Which checkpoint a run loads: only `/finetune resume` sets it, to a checkpoint of the run's own outputs.
        "resume_from",
        # The finished run whose final model a run starts from: only `base=RUN` sets them, from that run's outputs.
        "base_run",
        "base_model_digest",
    }
)


# --- the schema of a recipe file ---------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelRef(_Strict):
    """`model:` of a recipe: a hub id + commit, or a local folder pinned by its content digest."""

    id: str | None = None
    revision: str | None = None
    path: str | None = None
    build: str | None = Field(default=None, description="Command that builds a missing local model.")
    needs: str | None = Field(
        default=None, description="What to install before `build` can run; said with it while the model is missing."
    )
    config: dict[str, Any] | None = Field(default=None, description="config.json numbers, for the memory estimate.")


class DatasetRef(_Strict):
    """`dataset:` of a recipe: a catalog dataset by name (`manifests/datasets/NAME.yaml`, which knows its format), or
    a hub id + commit + content digest, or a local folder/file."""

    name: str | None = None
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

    # Default: the training dataset; a recipe with neither evaluates on data its pinned code generates (the quick
    # start's seeded synthetic set), so the code pin names the eval data.
    dataset: DatasetRef | None = None
    split: str = "eval"
    max_samples: int = Field(default=0, ge=0)
    metrics: list[str] = Field(default_factory=list)
    procedure_version: str = "v1"
    seed: int = 0
    # An lm-evaluation-harness suite (manifests/evals/suites/NAME.yaml, bot.catalog.harness) as the contract: the
    # final model is evaluated by the harness instead of the trainer's own procedure; the suite holds the rest.
    suite: str | None = None
    # The first metric ranks a sweep's trials; reaching `target` on it ends a sweep early. A decision rule, not
    # part of how runs are evaluated: it is not in the contract (nor its hash).
    target: float | None = None

    @model_validator(mode="after")
    def _one_contract(self) -> EvalSpec:
        if self.suite is None and not self.metrics:
            raise ValueError("name the metrics of the trainer's procedure, or a harness suite (`suite: NAME`)")
        if self.suite is not None and (self.metrics or self.dataset is not None or self.max_samples):
            raise ValueError(
                f"the contract of suite {self.suite} is its suite file's (tasks, metrics, limit): "
                "give `suite` alone (and `target`)"
            )
        return self


class OverrideDecl(_Strict):
    """One user-overridable key: the component input it sets and its type with bounds."""

    input: str | None = None  # default: the key itself
    type: str
    help: str | None = None


class PreflightSpec(_Strict):
    """`preflight:` of a distributed recipe: how `/finetune preflight` validates it before a real run."""

    # A pytorchjob with the presets' replicas on a cluster; `trl-preflight` (a job that starts every process
    # of the master replica under torchrun on one node) where only jobs run, as on the local stack.
    component: str = "trl-preflight-distributed"
    steps: int = Field(default=4, ge=1, le=100, description="Checkpoint every `steps`; 2 x steps in all.")
    comm_timeout_s: int = Field(default=60, ge=5, le=1800)


class ServingBudgets(_Strict):
    """What a serving check must stay within; each unset budget is not judged."""

    latency_p50_ms: float | None = Field(default=None, gt=0)
    latency_p95_ms: float | None = Field(default=None, gt=0)
    peak_memory_mb: float | None = Field(default=None, gt=0)
    min_tokens_per_s: float | None = Field(default=None, gt=0)
    max_load_time_s: float | None = Field(default=None, gt=0)


class PromptSetRef(_Strict):
    """The fixed prompt set a serving check runs, pinned by the sha256 of its file."""

    path: str
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")


class ServingSpec(_Strict):
    """How the recipe's models are served: what the serving check loads them with and the budgets it judges."""

    component: str = "serving-check"
    # The engine built into trainer/serving.py; a serving image (vLLM, say) writes the same report from its own.
    engine: Literal["transformers"] = "transformers"
    image: str | None = Field(default=None, description="The serving image; default the recipe's image")
    dtype: str = "float32"
    max_new_tokens: int = Field(default=64, ge=1, le=8192)
    prompts: PromptSetRef
    budgets: ServingBudgets = Field(default_factory=ServingBudgets)
    presets: list[str] = Field(default_factory=list, description="The serving environment; default the recipe's")


class RecipeFile(_Strict):
    """The schema of `manifests/recipes/NAME.yaml`."""

    name: str
    description: str
    # The TRL trainer (default: the component's; a TRL component is tagged with the trainer it runs).
    trainer: Literal["sft", "dpo", "grpo", "kto", "reward", "rloo"] | None = None
    component: str
    image: str | None = None
    code: CodeRef | None = None
    model: ModelRef | None = None
    dataset: DatasetRef | None = None
    # Catalog datasets a run may choose with `dataset=NAME` (`any`: every one in a format the trainer takes).
    datasets: list[str] | Literal["any"] = Field(default_factory=list)
    # GRPO and RLOO: the reward functions (manifests/rewards.yaml) a run uses unless it names others (`rewards=`).
    rewards: list[str] = Field(default_factory=list)
    eval: EvalSpec | None = None
    exploration: bool = False
    presets: list[str] = Field(default_factory=list)
    defaults: dict[str, Scalar] = Field(default_factory=dict)
    overrides: dict[str, OverrideDecl] = Field(default_factory=dict)
    axolotl_config: str | None = None
    preflight: PreflightSpec | None = None
    serving: ServingSpec | None = None
    # When runs go wrong (bot.catalog.policy): retried classes and budget, the start deadline, a channel for
    # final failures (besides the run's own thread).
    retry: RetrySpec | None = None
    # Training health watched from chat (bot.catalog.alerts): which alerts warn, which stop the run, their settings.
    alerts: AlertsSpec | None = None
    max_pending: str | int | None = None
    notify: str | None = Field(default=None, pattern=r"^[CG][A-Z0-9]{6,}$")

    @field_validator("max_pending")
    @classmethod
    def _max_pending(cls, v: str | int | None) -> str | int | None:
        if v is not None:
            duration_s(v)
        return v


# --- the catalog's types -----------------------------------------------------------------------


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

    def defaults(self) -> dict[str, Any]:
        """The value of every input that has one of its own (an optional input without one: None)."""
        return {name: item.value for name, item in self.inputs.items() if item.value is not None or item.optional}

    def unset(self, params: Mapping[str, Any]) -> list[str]:
        """Required inputs `params` leaves unset (a compile step refuses them by name)."""
        return [name for name, item in self.inputs.items() if name not in params and not item.optional]


class Preset(BaseModel):
    """A Polyaxon preset file plus its catalog metadata."""

    name: str
    file: str
    description: str
    document: dict[str, Any]  # what Polyaxon merges (without the catalog's metadata: name, description, family)
    target_kind: str | None  # "job", "pytorchjob", or None for any run kind
    params: dict[str, Any] = Field(default_factory=dict)
    # `maxPending`: how long a run on this preset may wait to start before the bot stops it (seconds or 10m).
    max_pending: str | int | None = None
    # `maxDuration`: the longest a run on this preset is expected to run: an estimate's bound before any was measured.
    max_duration: str | int | None = None
    # What the preset decides: `resources` (accelerators, CPU, memory, the node pool they need, the queue),
    # `placement` (spot/preemptible nodes, zones, retries) or `storage` (where checkpoints go). A run gets one
    # preset per family: the user's replaces the recipe's default of the same family, the others stay.
    family: str = "placement"


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
