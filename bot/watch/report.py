"""What the watcher writes: a finished run's metrics, whether it can be resumed, where a resume started. Pure.

The trainer reports in its run's outputs (see `trainer/`): `checkpoint_latest` / `checkpoint_latest_step`
after each complete checkpoint, `resumed_from_checkpoint` / `resumed_from_step` when a resume loaded one,
`max_steps`, and at the end the final evaluation (the eval contract's metrics and `eval_contract_hash`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.slack.blocks import escape
from storage.models import Run


def metrics_text(metrics: dict[str, float], contract_metrics: Sequence[str] = ()) -> str:
    """Eval metrics (`eval_*` and the eval contract's own), then the training summary, each on its own line."""
    evals = {k: v for k, v in sorted(metrics.items()) if k.startswith("eval_") or k in contract_metrics}
    train = {
        k: v
        for k, v in sorted(metrics.items())
        if k in {"loss", "train_loss", "train_runtime"} and k not in contract_metrics
    }
    parts = []
    if evals:
        parts.append("*Eval* " + " · ".join(f"{escape(k)} `{v:.4g}`" for k, v in evals.items()))
    if train:
        parts.append("*Train* " + " · ".join(f"{k} `{v:.4g}`" for k, v in train.items()))
    return ("\n" + "\n".join(parts)) if parts else ""


def final_eval(outputs: Mapping[str, Any], contract_metrics: Sequence[str] = ()) -> dict[str, float]:
    """The metrics of the run's final evaluation (written with the contract's hash): `eval_*` and the contract's own
    (the quick start's `accuracy`); empty without one."""
    if not outputs.get("eval_contract_hash"):
        return {}
    return {k: float(v) for k, v in outputs.items() if (k.startswith("eval_") or k in contract_metrics) and _number(v)}


# Numbers the trainer reports about itself beside the metrics Polyaxon's summary sync copies into the outputs.
BOOKKEEPING = frozenset(
    {
        "global_step",
        "max_steps",
        "checkpoint_latest_step",
        "checkpoint_best_step",
        "resumed_from_step",
        "stopped_at_step",
        "nonfinite_step",  # where the trainer met a NaN (bot.health reads its count and names)
        "model_size_bytes",
        "model_files",
    }
)


def live_metrics(outputs: Mapping[str, Any]) -> dict[str, float]:
    """The last value of each metric a running run logged, as its listing carries them (its outputs)."""
    return {k: float(v) for k, v in outputs.items() if _number(v) and k not in BOOKKEEPING}


def live_step(outputs: Mapping[str, Any]) -> int | None:
    """The step of the trainer's last logged metrics (`global_step`, logged with them), or None."""
    return _as_int(outputs.get("global_step"))


def checkpoint_step(outputs: Mapping[str, Any]) -> int | None:
    """The step of the latest complete checkpoint the trainer reported, or None."""
    return _as_int(outputs.get("checkpoint_latest_step"))


def resumed_text(outputs: Mapping[str, Any], run: Run) -> str | None:
    """`Resumed from checkpoint-72 (step 72/500).` once the trainer reported what it loaded; None before."""
    step = _as_int(outputs.get("resumed_from_step"))
    if step is None:
        return None
    name = outputs.get("resumed_from_checkpoint") or f"checkpoint-{step}"
    total = _as_int(outputs.get("max_steps")) or _as_int(run.params.get("max_steps"))
    of = f"/{total}" if total else ""
    return f":leftwards_arrow_with_hook: Resumed from `{escape(str(name))}` (step {step}{of})."


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_int(value: Any) -> int | None:
    return int(value) if _number(value) else None
