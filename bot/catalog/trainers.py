"""What the catalog knows of each TRL trainer a recipe may name (`trainer: sft|dpo|grpo|kto|reward|rloo`). Pure.

A recipe's trainer decides its component (`trl-<trainer>`, whose inputs are that trainer's own config keys,
so a recipe or override key the trainer lacks is refused with the closest names), the dataset formats it
trains on (`bot.catalog.formats`), whether it takes reward functions, and its evaluation procedure with the
metrics that procedure writes (the trainer's `trainer.evaluation.PROCEDURE_METRICS`, which a test keeps
equal to `PROCEDURES`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.catalog.formats import TRAINER_FORMATS
from bot.catalog.manifests import Component

REWARD_METRIC_PREFIX = "eval_reward_"


@dataclass(frozen=True)
class TrainerKind:
    """One trainer as the catalog sees it."""

    name: str
    procedure: str  # the eval procedure the trainer runs (trainer.evaluation)
    takes_rewards: bool = False
    # Besides the policy, what it holds while training (the memory estimate): a frozen reference model unless
    # LoRA (its disabled adapter) or precomputed reference log-probs stand in; GRPO and RLOO hold one only when
    # `beta` is above 0.
    reference_model: str = "never"  # "never" | "unless-lora-or-precomputed" | "when-beta"
    # Whether its final model is a causal language model (what a harness suite evaluates); a reward model scores.
    causal_lm: bool = True

    @property
    def formats(self) -> tuple[str, ...]:
        """The dataset formats it trains on."""
        return TRAINER_FORMATS[self.name]


TRAINER_KINDS: dict[str, TrainerKind] = {
    kind.name: kind
    for kind in (
        TrainerKind("sft", "v1"),
        TrainerKind("dpo", "pref-v1", reference_model="unless-lora-or-precomputed"),
        TrainerKind("kto", "pref-v1", reference_model="unless-lora-or-precomputed"),
        TrainerKind("reward", "reward-v1", causal_lm=False),
        TrainerKind("grpo", "gen-v1", takes_rewards=True, reference_model="when-beta"),
        TrainerKind("rloo", "gen-v1", takes_rewards=True, reference_model="when-beta"),
    )
}

# The metrics each procedure writes; `gen-v1` also writes `eval_reward_<name>` for each reward function a run uses.
PROCEDURES: dict[str, tuple[str, ...]] = {
    "v1": ("eval_loss", "eval_perplexity", "eval_mean_token_accuracy", "eval_entropy"),
    "pref-v1": ("eval_preference_accuracy", "eval_reward_margin"),
    "reward-v1": ("eval_pairwise_accuracy", "eval_reward_margin"),
    "gen-v1": ("eval_mean_reward",),
}


def reward_metric(name: str) -> str:
    """The metric reporting reward function `name` (`exact-match` -> `eval_reward_exact_match`)."""
    return REWARD_METRIC_PREFIX + name.replace("-", "_")


def unknown_metrics(kind: TrainerKind, procedure: str, metrics: list[str], rewards: tuple[str, ...]) -> str | None:
    """Why an eval contract's procedure or metrics are not what `kind` writes (None when they are)."""
    if procedure != kind.procedure:
        return f"the {kind.name} trainer evaluates with procedure {kind.procedure}, not {procedure}"
    known = PROCEDURES[procedure] + tuple(reward_metric(name) for name in rewards)
    wrong = [metric for metric in metrics if metric not in known]
    if wrong:
        return f"procedure {procedure} does not write {', '.join(wrong)} (it writes {', '.join(known)})"
    return None


def component_trainer(component: Component) -> TrainerKind | None:
    """The TRL trainer a component runs (tagged `trl` and a trainer's name), or None for other components."""
    tags = component.document.get("tags") or []
    if "trl" not in tags:
        return None
    names = [tag for tag in tags if tag in TRAINER_KINDS]
    return TRAINER_KINDS[names[0]] if names else None


def holds_reference(kind: TrainerKind, params: dict[str, object]) -> bool:
    """Whether a run of `kind` with `params` holds a frozen reference copy of the model while training."""
    if kind.reference_model == "unless-lora-or-precomputed":
        return not params.get("use_peft") and not params.get("precompute_ref_log_probs")
    if kind.reference_model == "when-beta":
        return float(str(params.get("beta") or 0)) > 0 and not params.get("use_peft")
    return False
