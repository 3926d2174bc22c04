"""What the watcher writes: the metrics of a finished run as one line per kind. Pure."""

from __future__ import annotations


def metrics_text(metrics: dict[str, float]) -> str:
    """Eval metrics, then the training summary, each on its own line (empty when there are none)."""
    evals = {k: v for k, v in sorted(metrics.items()) if k.startswith("eval_")}
    train = {k: v for k, v in sorted(metrics.items()) if k in {"loss", "train_loss", "train_runtime"}}
    parts = []
    if evals:
        parts.append("*Eval* " + " · ".join(f"{k} `{v:.4g}`" for k, v in evals.items()))
    if train:
        parts.append("*Train* " + " · ".join(f"{k} `{v:.4g}`" for k, v in train.items()))
    return ("\n" + "\n".join(parts)) if parts else ""
