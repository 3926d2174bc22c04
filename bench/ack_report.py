"""What `bench.ack` prints: latency per command kind and app, per-burst p99 ratios, and the targets."""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field

from bench.verdict import at_most

ACK_DEADLINE_S = 3.0
# Per burst pair, finetune-bot's percentile / the bare app's (issue 34): p50 <= 1.2x and p99 <= 1.3x.
TARGETS = {50: 1.2, 99: 1.3}
APPS = {"full": "finetune-bot", "bare": "bare Bolt (ack only)"}


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q`th percentile."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


@dataclass
class Results:
    """Ack latencies (seconds) by (kind, app) and each burst pair's p99 ratio by kind, in round order."""

    latencies: dict[tuple[str, str], list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    # (kind, q) -> each burst pair's ratio of the q-th percentiles, in round order.
    ratios: dict[tuple[str, int], list[float]] = field(default_factory=lambda: collections.defaultdict(list))

    def add_pair(self, kind: str, full: list[float], bare: list[float]) -> None:
        """One burst of `kind` at each app."""
        self.latencies[kind, "full"].extend(full)
        self.latencies[kind, "bare"].extend(bare)
        for q in TARGETS:
            self.ratios[kind, q].append(percentile(full, q) / percentile(bare, q))

    def over_deadline(self, kind: str, app: str = "full") -> int:
        """Acks slower than Slack's 3 s."""
        return sum(v > ACK_DEADLINE_S for v in self.latencies[kind, app])


def print_latencies(results: Results, kinds: list[str]) -> None:
    """The table: p50/p95/p99/max/mean and acks over 3 s per kind and app."""
    print(f"{'kind':<6}{'app':<22}{'acks':>6}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}{'mean':>8}{'> 3 s':>7}")
    for kind in kinds:
        for app, name in APPS.items():
            v = results.latencies[kind, app]
            print(
                f"{kind:<6}{name:<22}{len(v):>6}{percentile(v, 50) * 1e3:8.1f}{percentile(v, 95) * 1e3:8.1f}"
                f"{percentile(v, 99) * 1e3:8.1f}{max(v) * 1e3:8.1f}{statistics.mean(v) * 1e3:8.1f}"
                f"{results.over_deadline(kind, app):7d}"
            )


def print_ratios(results: Results, kinds: list[str]) -> bool:
    """Per-burst p50 and p99 ratios against their targets, with their spread; whether every target was met."""
    print("ratio finetune-bot / bare Bolt, per burst pair (in round order):")
    met = True
    for kind in kinds:
        over = results.over_deadline(kind)
        for q, target in TARGETS.items():
            ratios = results.ratios[kind, q]
            said = at_most(ratios, target)
            print(
                f"  {kind:<5} p{q}: median {statistics.median(ratios):.2f}, min-max {min(ratios):.2f}-{max(ratios):.2f}"
                f" ({', '.join(f'{r:.2f}' for r in ratios)}); target <= {target} per burst -> {said}"
            )
            met = met and said == "met"
        print(f"  {kind:<5} finetune-bot acks over 3 s: {over} (target 0)")
        met = met and over == 0
    return met
