"""How fast a team's dataset is checked row by row: `datarows.check_file` against `json.loads` line by line.

    .venv/bin/python -m bench.rows [--size-mb 1024] [--rounds 5] [--json OUT.json]

A generated JSONL file of `--size-mb` MB of prompt/completion rows (a team's questions and answers, ~170 bytes a
row; one bad row in 10,000, so the report path runs too) is read whole, in rounds, by two variants in a rotated
order after one warm-up read of each that is not counted (the file is then in the page cache for both):

- `datarows`: what the catalog runs when it loads (and the trainer before its first step): every line parsed with
  orjson and checked in its format (fields, types, emptiness), the first problems kept with their line.
- `json_loads`: the baseline, the standard library's `json.loads` of every line and nothing else.

Printed: each variant's MB/s (median, min-max), the per-round ratio datarows / json_loads (time), and the machine's
load before and after. Target: the whole check costs no more than parsing alone with `json` (ratio <= 1.0), judged
on the interval that holds the median ratio (bench/verdict.py): `met`, `NOT met` or `inconclusive`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.verdict import at_most, load, median_interval  # noqa: E402  (after the path: run as a script)
from datarows import DataFormat, check_file  # noqa: E402

TARGET = 1.0
VARIANTS = ("datarows", "json_loads")
FORMAT = DataFormat("prompt_completion")


def generate(path: Path, size_mb: int) -> int:
    """Write about `size_mb` MB of JSONL rows to `path`; the number of rows."""
    target = size_mb * 1024 * 1024
    written = rows = 0
    with path.open("w", encoding="utf-8") as out:
        chunk: list[str] = []
        while written < target:
            if rows % 10_000 == 9_999:
                line = json.dumps({"prompt": f"What does error E{rows} mean on the ingest service?"})
            else:
                line = json.dumps(
                    {
                        "prompt": f"How do I restart worker {rows} of the ingest service after a failed deploy?",
                        "completion": f"Run `svc restart ingest-worker-{rows}`, then check `svc status` shows it up.",
                    }
                )
            chunk.append(line)
            written += len(line) + 1
            rows += 1
            if len(chunk) == 10_000:
                out.write("\n".join(chunk) + "\n")
                chunk.clear()
        if chunk:
            out.write("\n".join(chunk) + "\n")
    return rows


def with_datarows(path: Path) -> int:
    """Every row checked; the problems found (one in 10,000 rows)."""
    return check_file(path, FORMAT).problem_count


def with_json_loads(path: Path) -> int:
    """Every line parsed by the standard library; the rows."""
    loads = json.loads
    count = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                loads(line)
                count += 1
    return count


RUNNERS: dict[str, Callable[[Path], int]] = {"datarows": with_datarows, "json_loads": with_json_loads}


def measure(path: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds per variant per round, interleaved in a rotated order after one warm-up of each."""
    for name in VARIANTS:
        RUNNERS[name](path)
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_ in range(rounds):
        order = VARIANTS[round_ % 2 :] + VARIANTS[: round_ % 2]
        for name in order:
            started = time.perf_counter()
            RUNNERS[name](path)
            seconds[name].append(time.perf_counter() - started)
    return seconds


def summary(values: list[float]) -> dict[str, float]:
    """Median, min and max."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    """Generate, measure, print; write the figures as JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    before = load()
    with tempfile.TemporaryDirectory(prefix="bench-rows-") as folder:
        path = Path(folder) / "train.jsonl"
        rows = generate(path, args.size_mb)
        size_mb = path.stat().st_size / 1024 / 1024
        problems = with_datarows(path)
        seconds = measure(path, args.rounds)
    ratios = [a / b for a, b in zip(seconds["datarows"], seconds["json_loads"], strict=True)]
    low, high, coverage = median_interval(ratios)
    verdict = at_most(ratios, TARGET)
    data: dict[str, Any] = {
        "size_mb": round(size_mb, 1),
        "rows": rows,
        "problems": problems,
        "rounds": args.rounds,
        "mb_per_s": {name: summary([size_mb / s for s in values]) for name, values in seconds.items()},
        "ratio": summary(ratios),
        "per_round": ratios,
        "interval": [low, high, coverage],
        "verdict": verdict,
        "target": TARGET,
        "load_before": before,
        "load_after": load(),
    }
    for name, stats in data["mb_per_s"].items():
        print(f"{name:>10}: {stats['median']:.0f} MB/s (min {stats['min']:.0f}, max {stats['max']:.0f})")
    print(
        f"datarows / json_loads (time): median {data['ratio']['median']:.3f}, interval {low:.3f}-{high:.3f} "
        f"({coverage:.0%}) over {args.rounds} rounds; target <= {TARGET} -> {verdict}"
    )
    print(f"{size_mb:.0f} MB, {rows} rows, {problems} bad rows found; load {before} -> {data['load_after']}")
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
