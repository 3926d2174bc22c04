"""How every bench says whether a target was met: from the spread of its paired measurements (the interval that
holds their median with 95 % confidence), never from one figure, and with the machine's load beside it."""

from __future__ import annotations

import math
import os

# A variant that does strictly more work measuring faster than this over one that does less is noise.
NOISE_RATIO = 1.05
# The confidence of the interval a verdict reads: the median's, from the paired figures' order statistics.
CONFIDENCE = 0.95


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): the narrowest interval between the k-th smallest and the k-th largest figure that
    holds the median of what is measured with at least `confidence`, whatever the figures' distribution.

    The k-th and (n + 1 - k)-th order statistics of n paired figures hold the median with probability
    1 - 2 P(Binomial(n, 1/2) <= k - 1). Up to 8 figures that is their min-max (6 figures: 97 %; 5: 94 %, the
    min-max is then all there is); with more, the outer figures are dropped only as far as `confidence` allows
    (12 figures: the 3rd to the 10th, 96 %; 20: the 6th to the 15th, 96 %). One bad round then no longer
    decides a verdict by itself, and a bench that wants a narrower interval has to measure more rounds.
    """
    ordered = sorted(values)
    n = len(ordered)
    k, coverage = 1, _coverage(n, 1)
    while k + 1 <= (n + 1) // 2 and _coverage(n, k + 1) >= confidence:
        k += 1
        coverage = _coverage(n, k)
    return ordered[k - 1], ordered[n - k], coverage


def _coverage(n: int, k: int) -> float:
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def at_most(values: list[float], target: float) -> str:
    """`met` when the median's interval (`median_interval`) lies within `target` (a ratio that must stay low),
    `NOT met` when it lies wholly above, else `inconclusive`: a spread that straddles the target says nothing
    either way."""
    low, high, _ = median_interval(values)
    if high <= target:
        return "met"
    if low > target:
        return "NOT met"
    return "inconclusive"


def at_least(values: list[float], target: float) -> str:
    """`met` when the median's interval reaches `target` (a ratio that must stay high), `NOT met` when it lies
    wholly below, else `inconclusive`."""
    low, high, _ = median_interval(values)
    if low >= target:
        return "met"
    if high < target:
        return "NOT met"
    return "inconclusive"


def load() -> str:
    """The load averages (1/5/15 min) and the cores, as the benches print them."""
    return "/".join(f"{v:.2f}" for v in os.getloadavg()) + f" on {os.cpu_count()} cores"
