"""How every bench says whether a target was met: from the spread of its paired measurements, never from one
figure, and with the machine's load beside it."""

from __future__ import annotations

import os

# A variant that does strictly more work measuring faster than this over one that does less is noise.
NOISE_RATIO = 1.05


def at_most(values: list[float], target: float) -> str:
    """`met` when every value is within `target` (a ratio that must stay low), `NOT met` when none is, else
    `inconclusive`: a spread that straddles the target says nothing either way."""
    if max(values) <= target:
        return "met"
    if min(values) > target:
        return "NOT met"
    return "inconclusive"


def at_least(values: list[float], target: float) -> str:
    """`met` when every value reaches `target` (a ratio that must stay high), `NOT met` when none does, else
    `inconclusive`."""
    if min(values) >= target:
        return "met"
    if max(values) < target:
        return "NOT met"
    return "inconclusive"


def load() -> str:
    """The load averages (1/5/15 min) and the cores, as the benches print them."""
    return "/".join(f"{v:.2f}" for v in os.getloadavg()) + f" on {os.cpu_count()} cores"
