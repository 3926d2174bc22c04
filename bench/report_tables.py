"""The tables `bench.report` writes into docs/benchmarks.md, from each bench's `--json` figures (pure: data in,
Markdown lines out)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from bench.verdict import NOISE_RATIO, at_least, median_interval


@dataclass(frozen=True)
class Stamp:
    """Where a table's figures come from: when, which code, what command, and how loaded the machine was."""

    date: str  # "2026-12-05 23:40 UTC"
    commit: str  # `git rev-parse --short HEAD`, "+dirty" when tracked files differ from it
    command: str
    load_before: str  # bench.verdict.load(): "1/5/15-minute averages on N cores"
    load_after: str

    def line(self) -> str:
        """The sentence above the table."""
        return (
            f"*Generated {self.date} at commit `{self.commit}` by `{self.command}`; load average (1/5/15 min) "
            f"{self.load_before} before, {self.load_after} after.*"
        )


def count(value: int) -> str:
    """10000 -> 10,000 (as the prose writes counts)."""
    return f"{value:,}"


def table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A Markdown table; `align` has one `l` or `r` per column."""
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(cells) + " |" for cells in (header, rule, *rows)]


def render_scale(data: dict[str, Any]) -> list[str]:
    """bench/scale.py: statements, requests and ms of a command, the first tick, a tick and a digest per size."""
    rows = [
        [
            count(r["runs"]),
            _SCALE_WHAT.get(r["what"], r["what"]),
            str(r["statements"]),
            str(r["requests"]),
            _ms(r["ms"]),
        ]
        for r in data["rows"]
    ]
    header = [
        "runs in the database",
        "what",
        "SQL statements",
        "Polyaxon requests",
        f"ms (median of {data['repeats']})",
    ]
    lines = table(header, "rlrrr", rows)
    lines += ["", f"{data['active']} running runs at every size (9 at 10); Polyaxon is a stub in its API's shape."]
    return lines


_SCALE_WHAT = {
    "command": "command (`status <uuid prefix>`)",
    "first tick": "watcher's first tick (lists every active run)",
    "tick": "watcher tick (nothing changed)",
    "digest": "digest",
}


def render_digest(data: dict[str, Any]) -> list[str]:
    """bench/digest.py: one channel's digest at two database sizes, statements and median ms."""
    rows = [
        [count(r["runs"]), count(min(r["runs"], data["recent"])), str(r["statements"]), _ms(r["ms"])]
        for r in data["rows"]
    ]
    header = ["runs in the database", "in the period", "SQL statements", f"ms (median of {data['repeats']})"]
    small, big = data["rows"][0], data["rows"][-1]
    same = "the same" if small["statements"] == big["statements"] else "NOT the same"
    return [
        *table(header, "rrrr", rows),
        "",
        f"Statements at {count(small['runs'])} and {count(big['runs'])} runs: {same} ({small['statements']} / "
        f"{big['statements']}); time {big['ms'] / small['ms']:.1f}x (it grows with the channel's active runs: a "
        "quarter of the seeded runs are running).",
    ]


def render_watcher(data: dict[str, Any]) -> list[str]:
    """bench/watcher.py: requests, Slack calls and seconds of the first, an idle and a busy tick per size."""
    rows = [
        [
            count(r["running"]),
            count(r["waiting"]),
            r["polyaxon"],
            r["tick"],
            str(r["requests"]),
            str(r["slack_calls"]),
            str(r["transitions"]),
            f"{r['seconds']:.3f}",
        ]
        for r in data["rows"]
    ]
    header = ["running", "waiting", "Polyaxon", "tick", "Polyaxon requests", "Slack calls", "transitions", "seconds"]
    lines = table(header, "rrllrrrr", rows)
    lines += ["", *watcher_verdicts(data)]
    return lines


def watcher_verdicts(data: dict[str, Any]) -> list[str]:
    """The targets: idle and busy ticks make the same number of requests at every size, waiting runs included."""
    said = []
    for tick, what in (("idle", "nothing changed"), ("busy", _busy(data))):
        requests = sorted({r["requests"] for r in data["rows"] if r["tick"] == tick})
        verdict = "met" if len(requests) == 1 else "NOT met"
        shown = " / ".join(str(n) for n in requests)
        said.append(f"- {tick} ({what}): {shown} request(s) at every size → same at every size: **{verdict}**")
    return said


def _busy(data: dict[str, Any]) -> str:
    return f"{data['changes']} runs synced new metrics, 1 succeeded, 1 waiting run scheduled"


def render_trainer(data: dict[str, Any]) -> list[str]:
    """bench/trainer.py: tokens/s per variant and the per-round ratios, with the headline's verdict."""
    from bench.trainer import TARGET, noisy

    rows = [
        [name, *(f"{stats[k]:.0f}" for k in ("median", "min", "max"))] for name, stats in data["tokens_per_s"].items()
    ]
    rows += [
        [name.replace("_over_", " / "), *(f"{stats[k]:.3f}" for k in ("median", "min", "max"))]
        for name, stats in data["ratios"].items()
    ]
    per_round = data["per_round"]["recipe_over_sft_trainer"]
    noise = noisy(data["per_round"])
    headline = data["ratios"]["recipe_over_sft_trainer"]["median"]
    verdict = "inconclusive (more work measured faster)" if headline > NOISE_RATIO else at_least(per_round, TARGET)
    low, high, coverage = median_interval(per_round)
    return [
        *table(["tokens/s, ratio", "median", "min", "max"], "lrrr", rows),
        "",
        f"Recipe `{data['recipe']}`, {data['rounds']} rounds, threads {data['threads']}. Headline recipe / "
        f"SFTTrainer: target ≥ {TARGET} on the interval that holds its median, {low:.3f}–{high:.3f} "
        f"({coverage:.0%}) → **{verdict}**; {len(noise)} round figure(s) flagged as noise.",
    ]


def render_rows(data: dict[str, Any]) -> list[str]:
    """bench.rows: MB/s of the whole row check against json.loads line by line, and the verdict on their ratio."""
    rows = [[name, *(f"{stats[k]:.0f}" for k in ("median", "min", "max"))] for name, stats in data["mb_per_s"].items()]
    ratio = data["ratio"]
    rows.append(["datarows / json_loads (time)", *(f"{ratio[k]:.3f}" for k in ("median", "min", "max"))])
    low, high, coverage = data["interval"]
    return [
        *table(["MB/s, ratio", "median", "min", "max"], "lrrr", rows),
        "",
        f"{data['size_mb']:.0f} MB of prompt/completion JSONL, {data['rows']} rows ({data['problems']} bad, found), "
        f"{data['rounds']} rounds. Target: the check costs no more than `json.loads` alone (ratio ≤ {data['target']}) "
        f"on the interval that holds the median, {low:.3f}–{high:.3f} ({coverage:.0%}) → **{data['verdict']}**.",
    ]


def render_ack(data: dict[str, Any]) -> list[str]:
    """bench.ack: per round, finetune-bot's p50 and p99 over the bare app's against their targets, and the control's
    (a second bare app over the bare app); each verdict from the interval that holds the median."""
    from bench.ack_report import judge, over_control

    rows = []
    for kind, by_q in data["ratios"].items():
        for q, ratios in by_q.items():
            target = float(data["targets"][q])
            control = data["control"][kind][q]
            low, high, coverage = median_interval(ratios)
            c_low, c_high, _ = median_interval(control)
            second = over_control(ratios, control)
            s_low, s_high, _ = median_interval(second)
            rows.append(
                [
                    f"`{kind}`",
                    f"p{q}",
                    f"{statistics.median(ratios):.2f}",
                    f"{low:.2f}–{high:.2f} ({coverage:.0%})",
                    f"{min(ratios):.2f}–{max(ratios):.2f}",
                    f"{statistics.median(second):.2f} ({s_low:.2f}–{s_high:.2f})",
                    f"{statistics.median(control):.2f} ({c_low:.2f}–{c_high:.2f})",
                    f"≤ {target:g}",
                    f"**{judge(ratios, control, target)}**",
                ]
            )
    over = ", ".join(f"`{kind}` {n}" for kind, n in data["over_3s"].items())
    header = [
        "burst",
        "percentile",
        "ratio (median)",
        "interval",
        "min–max",
        "over the control",
        "control",
        "target",
        "verdict",
    ]
    return [
        *table(header, "llrrrrrll", rows),
        "",
        f"Database {data['database']}; {data['rounds']} rounds, one burst per app each, in an order that rotates; "
        f"acks over 3 s: {over}; answered {data['replies']}/{data['expected']}, planned "
        f"{data['planned']}/{data['runs_sent']}. The interval holds the median ratio with the confidence shown; the "
        "control is a second bare app, and its ratio (median and interval) to the bare app's is what the bench says "
        "of two identical apps. A verdict is met only when finetune-bot meets the target over both bare apps.",
    ]


def render_memory(data: dict[str, Any]) -> list[str]:
    """bench.memory: serve's RSS curve over the commands, the growth per command and the verdict."""
    rows = [[count(commands), f"{mb:.1f}"] for commands, mb in data["curve"]]
    idle = data["idle_mb"]
    growth = data["growth_kb_per_command"]
    return [
        *table(["`help` commands", "serve RSS (MB)"], "rr", rows),
        "",
        f"Idle RSS: serve {idle['serve']:.1f} MB, bare Bolt {idle['bare']:.1f} MB. Growth per command: first half "
        f"{growth['first_half']:.2f} KB, second half {growth['second_half']:.2f} KB → **{data['verdict']}**.",
    ]


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"
