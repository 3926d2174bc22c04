"""The eval contract as runs carry it: its ranking metric, and where two runs' contracts differ. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.catalog.contract import primary_metric

if TYPE_CHECKING:
    from storage.models import Run

__all__ = ["CONTRACT_FIELDS", "contract_differences", "primary_metric"]

CONTRACT_FIELDS = ("dataset", "revision", "split", "max_samples", "metrics", "procedure_version", "seed")


def contract_differences(runs: Sequence[Run]) -> list[str]:
    """Eval-contract fields that differ between the runs, as `field: a vs b`."""
    first = runs[0].eval_contract or {}
    out: list[str] = []
    for field in CONTRACT_FIELDS:
        values = [str((r.eval_contract or {}).get(field)) for r in runs]
        if len(set(values)) > 1:
            out.append(f"{field}: " + " vs ".join(dict.fromkeys(values)))
    if not out and len({r.eval_contract_hash for r in runs}) > 1 and first:
        out.append("eval contract hash: " + " vs ".join(dict.fromkeys(r.eval_contract_hash[:12] for r in runs)))
    return out
