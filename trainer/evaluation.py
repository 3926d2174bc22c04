"""The fixed evaluation contract, its hash, and procedure `v1`.

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
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

PROCEDURE_VERSIONS = ("v1",)
V1_EVAL_BATCH_SIZE = 8
SUPPORTED_METRICS = ("eval_loss", "eval_perplexity", "eval_mean_token_accuracy", "eval_entropy")


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


def parse_metric_names(text: str) -> tuple[str, ...]:
    """Split a comma-separated metric list, refusing names procedure v1 cannot produce."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SUPPORTED_METRICS]
    if unknown:
        raise EvalContractError(f"unknown eval metrics {unknown}; supported: {', '.join(SUPPORTED_METRICS)}")
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
        metrics=parse_metric_names(eval_args.eval_metrics),
        procedure_version=eval_args.eval_procedure_version,
        seed=eval_args.eval_seed,
    )
    expected = eval_args.eval_contract_hash
    actual = contract_hash(contract.fields())
    if expected and expected.removeprefix("sha256:") != actual.removeprefix("sha256:"):
        raise EvalContractError(f"eval contract hash is {actual}, the recipe pins {expected}")
    return contract


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
    """Apply procedure v1's seeded row selection to a loaded eval split."""
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
