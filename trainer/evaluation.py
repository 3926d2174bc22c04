"""The fixed evaluation contract, its hash, and its procedures (`v1`, `pref-v1`, `reward-v1`, `gen-v1`).

A recipe's eval contract is the set of choices that must be equal for two runs' eval numbers to be
comparable. Its hash (`contract_hash`) is computed the same way by the trainer and the bot's catalog:

    fields  = {"dataset": str, "revision": str, "split": str, "max_samples": int (0 = all rows),
               "metrics": sorted list of unique metric names, "procedure_version": str, "seed": int}
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    hash    = "sha256:" + sha256(payload.encode("utf-8")).hexdigest()

Only these seven fields go in; the dataset name is taken as given (hub id or path as written in the
recipe). Procedure `v1`: load the split (trainer.data.load_split); when `max_samples` is set and
smaller than the split, keep `dataset.shuffle(seed=seed).select(range(max_samples))`; evaluate with
the trainer's own eval loop (same tokenization, chat template and loss masking as training) at a
fixed per-device eval batch size of `V1_EVAL_BATCH_SIZE`; report `eval_loss` (mean token cross-entropy),
`eval_perplexity` (= exp(eval_loss)), and TRL's `eval_mean_token_accuracy` / `eval_entropy`.

Every procedure below selects rows the same way (`select_rows`) and is run by the trainer's `evaluate()` at each
evaluation during training and once at the end (`trainer.procedures`); each sequence is scored on its own (no
padding), generation is greedy, so the numbers depend on the model and the contract only.

Procedure `pref-v1` (DPO and KTO; held-out PAIRS with columns `prompt`, `chosen`, `rejected`): for each pair and
each completion, logp = the sum of the completion tokens' log-probabilities given the prompt (tokenized as TRL's
DPOTrainer does: standard text gets the EOS token appended to the completion, conversational rows go through the
chat template, the completion starts where the prompt's tokens and the prompt+completion's tokens diverge, the
whole sequence is cut at the training config's `max_length`). The implicit reward is `beta * (policy logp -
reference logp)`, `beta` being the run's, the reference the model as loaded before training (what TRL's reference
is: the same weights, or the adapter-disabled base with LoRA). Reports `eval_preference_accuracy` (share of pairs
whose chosen reward exceeds the rejected one) and `eval_reward_margin` (mean chosen minus rejected reward).

Procedure `reward-v1` (reward models; PAIRS with `chosen`, `rejected`, an optional `prompt`): each of prompt+chosen
and prompt+rejected (EOS appended to standard text, the chat template applied to conversational rows, as TRL's
RewardTrainer tokenizes) gets the model's scalar score. Reports `eval_pairwise_accuracy` (share of pairs scored
chosen > rejected) and `eval_reward_margin` (mean score difference).

Procedure `gen-v1` (GRPO and RLOO; PROMPTS with `prompt` plus whatever columns the reward functions read, e.g.
`answer`): greedy decoding of at most the run's `max_completion_length` new tokens per prompt (conversational
prompts through the chat template with the generation prompt; left-padded batches of `V1_EVAL_BATCH_SIZE`), the
completion decoded without special tokens; each of the run's reward functions (`trainer.rewards`) scores every
completion. Reports `eval_reward_<name>` (the mean of function `name`, `-` written `_`) and `eval_mean_reward`
(the mean over prompts of the sum of the functions' rewards, weighted by the run's `reward_weights`, 1 each when
unset, as TRL's `reward` is).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from trainer.rewards import REGISTRY, metric_name

V1_EVAL_BATCH_SIZE = 8
SUPPORTED_METRICS = ("eval_loss", "eval_perplexity", "eval_mean_token_accuracy", "eval_entropy")
# The metrics each procedure produces; a contract names only metrics of its own procedure.
PROCEDURE_METRICS: dict[str, tuple[str, ...]] = {
    "v1": SUPPORTED_METRICS,
    "pref-v1": ("eval_preference_accuracy", "eval_reward_margin"),
    "reward-v1": ("eval_pairwise_accuracy", "eval_reward_margin"),
    "gen-v1": ("eval_mean_reward", *(metric_name(name) for name in REGISTRY)),
}
PROCEDURE_VERSIONS = tuple(PROCEDURE_METRICS)


class EvalContractError(ValueError):
    """The eval contract is invalid, or does not match the hash the recipe pinned."""


@dataclass(frozen=True)
class EvalContract:
    """The fields that define a comparable evaluation."""

    dataset: str
    revision: str
    split: str
    max_samples: int
    metrics: tuple[str, ...]
    procedure_version: str
    seed: int

    def fields(self) -> dict[str, Any]:
        """Return the canonical field mapping that the hash covers."""
        return {
            "dataset": self.dataset,
            "revision": self.revision,
            "split": self.split,
            "max_samples": self.max_samples,
            "metrics": sorted(set(self.metrics)),
            "procedure_version": self.procedure_version,
            "seed": self.seed,
        }


def contract_hash(fields: dict[str, Any]) -> str:
    """Return `sha256:<hex>` of the canonical JSON of a contract's fields (see the module docstring)."""
    canonical = dict(fields)
    canonical["metrics"] = sorted(set(canonical["metrics"]))
    payload = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def parse_metric_names(text: str, procedure: str = "v1") -> tuple[str, ...]:
    """Split a comma-separated metric list, refusing names the procedure cannot produce."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    supported = PROCEDURE_METRICS[procedure]
    unknown = [name for name in names if name not in supported]
    if unknown:
        raise EvalContractError(
            f"unknown eval metrics {unknown} for procedure {procedure}; supported: {', '.join(supported)}"
        )
    if not names:
        raise EvalContractError("the eval contract names no metrics")
    return names


def contract_from_args(eval_args: Any) -> EvalContract | None:
    """Build the contract from `EvalArguments` (None when no eval dataset is set) and check its pinned hash."""
    if not eval_args.eval_dataset_name:
        return None
    if eval_args.eval_procedure_version not in PROCEDURE_VERSIONS:
        raise EvalContractError(
            f"unknown eval procedure {eval_args.eval_procedure_version!r}; known: {', '.join(PROCEDURE_VERSIONS)}"
        )
    if eval_args.eval_max_samples < 0:
        raise EvalContractError("eval_max_samples must be >= 0")
    contract = EvalContract(
        dataset=eval_args.eval_dataset_name,
        revision=eval_args.eval_dataset_revision,
        split=eval_args.eval_split,
        max_samples=eval_args.eval_max_samples,
        metrics=parse_metric_names(eval_args.eval_metrics, eval_args.eval_procedure_version),
        procedure_version=eval_args.eval_procedure_version,
        seed=eval_args.eval_seed,
    )
    expected = eval_args.eval_contract_hash
    actual = contract_hash(contract.fields())
    if expected and expected.removeprefix("sha256:") != actual.removeprefix("sha256:"):
        raise EvalContractError(f"eval contract hash is {actual}, the recipe pins {expected}")
    return contract


def check_contract_fits(contract: EvalContract, trainer: str, procedure: str, reward_names: tuple[str, ...]) -> None:
    """Refuse a contract whose procedure is not the trainer's, or that names a reward the run does not use."""
    if contract.procedure_version != procedure:
        raise EvalContractError(
            f"--trainer {trainer} is evaluated by procedure {procedure}; the contract names "
            f"{contract.procedure_version}"
        )
    if procedure == "gen-v1":
        produced = {"eval_mean_reward", *(metric_name(name) for name in reward_names)}
        missing = [name for name in contract.metrics if name not in produced]
        if missing:
            raise EvalContractError(
                f"eval metrics {missing} score reward functions this run does not use "
                f"(--reward_funcs {','.join(reward_names)})"
            )


def best_metric(contract: EvalContract) -> tuple[str, bool]:
    """The metric that names the best checkpoint during training, and whether higher is better.

    The contract's first metric ranks runs (the bot's `compare` does the same); lower is better for losses,
    perplexity and errors. `eval_perplexity` is derived after evaluation, so `eval_loss` (same order) stands
    in for it.
    """
    name = contract.metrics[0]
    greater = not any(word in name for word in ("loss", "perplexity", "error"))
    return ("eval_loss" if name == "eval_perplexity" else name), greater


def select_rows(dataset: Any, contract: EvalContract) -> Any:
    """Apply the seeded row selection (every procedure's) to a loaded eval split."""
    if contract.max_samples and contract.max_samples < len(dataset):
        return dataset.shuffle(seed=contract.seed).select(range(contract.max_samples))
    return dataset


def report_metrics(raw: dict[str, float], contract: EvalContract) -> dict[str, float]:
    """Derive the contract's metrics from a Trainer.evaluate() result."""
    derived = dict(raw)
    if "eval_loss" in derived:
        derived["eval_perplexity"] = math.exp(min(derived["eval_loss"], 700.0))
    missing = [name for name in contract.metrics if name not in derived]
    if missing:
        raise EvalContractError(f"evaluation did not produce {missing}")
    return {name: float(derived[name]) for name in contract.metrics}


def eval_results(
    contract: EvalContract, metrics: dict[str, float], global_step: int, pins: dict[str, Any]
) -> dict[str, Any]:
    """Return the `eval_results.json` document: metrics plus the contract and its hash."""
    fields = contract.fields()
    return {
        "contract": fields,
        "contract_hash": contract_hash(fields),
        "metrics": metrics,
        "global_step": global_step,
        "pins": pins,
    }
