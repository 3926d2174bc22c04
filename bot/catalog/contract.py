"""Reading an eval contract as runs carry it: which metric ranks them, and which way is better. Pure."""

from __future__ import annotations

from typing import Any


def primary_metric(contract: dict[str, Any]) -> tuple[str, bool]:
    """The eval contract's ranking metric and whether higher is better (losses and perplexity: lower)."""
    name = contract.get("primary_metric") or contract.get("metric")
    if not name:
        metrics = contract.get("metrics") or contract.get("metric_names") or ["eval_loss"]
        name = metrics[0] if isinstance(metrics, list) and metrics else "eval_loss"
    name = str(name)
    higher = contract.get("greater_is_better")
    if higher is None:
        higher = not any(word in name for word in ("loss", "perplexity", "error"))
    return name, bool(higher)
