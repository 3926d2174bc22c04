"""bench.report's rendering and document rewriting, on fixed figures (the benches themselves are not run here)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from bench.ack_report import judge
from bench.report import BENCHES, chosen, marker, replace_section, section
from bench.report_tables import Stamp, render_ack, render_digest, render_memory, render_scale, render_watcher
from bench.verdict import at_least, at_most, median_interval

REPO = Path(__file__).resolve().parents[2]
STAMP = Stamp("2026-12-05 23:40 UTC", "db8f94b+dirty", "python -m bench.scale", "1.20/0.90/0.50 on 2 cores", "1.80")

DOC = """# Benchmarks

Prose before, with a `<!-- bench.report:begin NAME -->` mention.

<!-- bench.report:begin scale -->
| old | table |
<!-- bench.report:end scale -->

Prose between.
<!-- bench.report:begin watcher -->
*Not generated yet.*
<!-- bench.report:end watcher -->
Prose after, no newline at the end"""


def watcher_rows(idle: tuple[int, int]) -> dict[str, object]:
    rows = []
    for (running, waiting, kind), idle_requests in zip(((50, 5, "server"), (10_000, 1_000, "stub")), idle, strict=True):
        for tick, requests in (("first", 2 + waiting), ("idle", idle_requests), ("busy", 4)):
            rows.append(
                {
                    "running": running,
                    "waiting": waiting,
                    "polyaxon": kind,
                    "tick": tick,
                    "requests": requests,
                    "slack_calls": 9 if tick == "busy" else 0,
                    "transitions": 2 if tick == "busy" else 0,
                    "seconds": 0.1234,
                }
            )
    return {"changes": 5, "waiting_per_running": 0.1, "rows": rows}


def test_a_section_is_replaced_and_everything_outside_the_markers_is_kept_byte_for_byte() -> None:
    new = replace_section(DOC, "scale", ["| new | table |", "", "a line"])
    before, after = DOC.split(marker("scale"))[0], DOC.split(marker("scale", end=True))[1]
    assert new == before + marker("scale") + "\n| new | table |\n\na line\n" + marker("scale", end=True) + after
    assert replace_section(new, "scale", ["| old | table |"]) == DOC  # nothing else moved
    assert replace_section(new, "watcher", ["x"]).count("Prose between.") == 1


@pytest.mark.parametrize(
    ("doc", "name", "found"),
    [
        (DOC, "trainer", 0),
        (DOC.replace(marker("watcher", end=True), ""), "watcher", 0),
        (DOC + "\n" + marker("scale") + "\n" + marker("scale", end=True), "scale", 2),
    ],
    ids=["missing", "unclosed", "twice"],
)
def test_a_section_missing_or_marked_twice_is_refused(doc: str, name: str, found: int) -> None:
    with pytest.raises(ValueError, match=f"^{found} sections marked"):
        replace_section(doc, name, [])


def test_the_documents_sections_are_each_marked_once() -> None:
    doc = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for name in BENCHES:
        replace_section(doc, name, [])  # raises unless marked exactly once


def test_the_stamp_says_when_which_commit_which_command_and_the_load() -> None:
    lines = section(STAMP, ["| t |"])
    assert lines[0] == (
        "*Generated 2026-12-05 23:40 UTC at commit `db8f94b+dirty` by `python -m bench.scale`; load average "
        "(1/5/15 min) 1.20/0.90/0.50 on 2 cores before, 1.80 after.*"
    )
    assert lines[1:] == ["", "| t |"]


def test_the_light_benches_run_by_default_and_a_heavy_one_only_when_named() -> None:
    assert chosen(None) == ["scale", "digest", "watcher"]
    assert chosen("watcher, trainer") == ["watcher", "trainer"]
    with pytest.raises(SystemExit, match="no bench named nope"):
        chosen("scale,nope")


def test_the_watcher_table_says_whether_an_idle_tick_costs_the_same_at_every_size() -> None:
    lines = render_watcher(watcher_rows(idle=(1, 1)))
    assert (
        lines[0] == "| running | waiting | Polyaxon | tick | Polyaxon requests | Slack calls | transitions | seconds |"
    )
    assert lines[2] == "| 50 | 5 | server | first | 7 | 0 | 0 | 0.123 |"
    assert "| 10,000 | 1,000 | stub | idle | 1 | 0 | 0 | 0.123 |" in lines
    assert lines[-2] == "- idle (nothing changed): 1 request(s) at every size → same at every size: **met**"
    assert lines[-1].endswith("4 request(s) at every size → same at every size: **met**")
    grown = render_watcher(watcher_rows(idle=(1, 3)))
    assert grown[-2] == "- idle (nothing changed): 1 / 3 request(s) at every size → same at every size: **NOT met**"


def test_the_scale_and_digest_tables() -> None:
    scale = render_scale(
        {
            "repeats": 5,
            "active": 10,
            "rows": [
                {"runs": 100_000, "what": "tick", "statements": 13, "requests": 1, "ms": 58.04},
                {"runs": 100_000, "what": "digest", "statements": 9, "requests": 0, "ms": 122.4},
            ],
        }
    )
    assert scale[0] == "| runs in the database | what | SQL statements | Polyaxon requests | ms (median of 5) |"
    assert scale[1] == "| ---: | --- | ---: | ---: | ---: |"
    assert scale[2:4] == [
        "| 100,000 | watcher tick (nothing changed) | 13 | 1 | 58.0 |",
        "| 100,000 | digest | 9 | 0 | 122 |",
    ]
    digest = render_digest(
        {
            "recent": 200,
            "repeats": 20,
            "rows": [{"runs": 1000, "statements": 9, "ms": 14.0}, {"runs": 10_000, "statements": 10, "ms": 225.0}],
        }
    )
    assert digest[2:4] == ["| 1,000 | 200 | 9 | 14.0 |", "| 10,000 | 200 | 10 | 225 |"]
    assert digest[-1].startswith("Statements at 1,000 and 10,000 runs: NOT the same (9 / 10); time 16.1x")


def test_the_ack_and_memory_tables_judge_from_the_spread() -> None:
    ack = render_ack(
        {
            "database": "sqlite",
            "rounds": 3,
            "targets": {"50": 1.2, "99": 1.3},
            "ratios": {"help": {"50": [1.1, 1.0, 1.15], "99": [1.2, 1.4, 1.25]}},
            "control": {"help": {"50": [0.95, 1.05, 1.0], "99": [1.05, 0.95, 1.0]}},
            "over_3s": {"help": 0},
            "replies": 300,
            "expected": 300,
            "planned": 0,
            "runs_sent": 0,
        }
    )
    # Over the control, round by round: 1.1 / 0.95, 1.0 / 1.05, 1.15 / 1.0.
    assert ack[2] == (
        "| `help` | p50 | 1.10 | 1.00–1.15 (75%) | 1.00–1.15 | 1.15 (0.95–1.16) | 1.00 (0.95–1.05) | ≤ 1.2 | **met** |"
    )
    assert ack[3] == (
        "| `help` | p99 | 1.25 | 1.20–1.40 (75%) | 1.20–1.40 | 1.25 (1.14–1.47) | 1.00 (0.95–1.05) | ≤ 1.3 "
        "| **inconclusive** |"
    )
    biased = render_ack(
        {
            "database": "sqlite",
            "rounds": 3,
            "targets": {"50": 1.2},
            "ratios": {"help": {"50": [1.0, 1.05, 1.1]}},
            # The two bare apps came out apart: met over the first (1.0-1.1), NOT met over the second (1.22-1.25).
            "control": {"help": {"50": [0.8, 0.85, 0.9]}},
            "over_3s": {"help": 0},
            "replies": 300,
            "expected": 300,
            "planned": 0,
            "runs_sent": 0,
        }
    )
    assert biased[2].endswith("| ≤ 1.2 | **inconclusive (the two bare apps disagree)** |")
    memory = render_memory(
        {
            "idle_mb": {"serve": 120.04, "bare": 31.0},
            "curve": [[0, 121.0], [10_000, 122.5]],
            "growth_kb_per_command": {"first_half": 0.31, "second_half": 0.02},
            "verdict": "plateaus",
        }
    )
    assert memory[2:4] == ["| 0 | 121.0 |", "| 10,000 | 122.5 |"]
    assert memory[-1].endswith("first half 0.31 KB, second half 0.02 KB → **plateaus**.")


def test_a_verdict_reads_the_interval_that_holds_the_median_not_one_round() -> None:
    # Up to 8 rounds the interval is the min-max (6 rounds hold the median with 97 % confidence).
    assert median_interval([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])[:2] == (1.0, 1.5)
    assert median_interval(list(range(8)))[:2] == (0, 7)
    # 12 rounds: the 3rd to the 10th (96 %); one bad round no longer decides, two on a side still widen it.
    low, high, coverage = median_interval([1.0] * 11 + [9.0])
    assert (low, high) == (1.0, 1.0) and 0.96 < coverage < 0.962
    assert median_interval(sorted([1.0] * 9 + [9.0] * 3))[1] == 9.0
    assert at_most([1.0] * 11 + [9.0], 1.2) == "met"
    assert at_most([1.0] * 9 + [1.5] * 3, 1.2) == "inconclusive"
    assert at_most([1.5] * 10 + [1.0] * 2, 1.2) == "NOT met"
    assert (
        at_least([0.99] * 6, 0.97) == "met" and at_least([0.96, 0.99, 0.99, 0.99, 0.99, 0.99], 0.97) == "inconclusive"
    )


def test_the_ack_bench_order_gives_every_app_every_place_and_every_neighbour_equally_often() -> None:
    from bench.ack import order

    places: collections.Counter[tuple[str, int]] = collections.Counter()
    before: collections.Counter[tuple[str, str]] = collections.Counter()
    for round_no in range(6):
        apps = order(round_no)
        assert sorted(apps) == ["bare", "control", "full"]
        places.update((app, place) for place, app in enumerate(apps))
        before.update((a, b) for i, a in enumerate(apps) for b in apps[i + 1 :])
    assert set(places.values()) == {2} and len(places) == 9
    assert set(before.values()) == {3} and len(before) == 6


def test_an_ack_target_is_met_only_when_it_is_met_over_both_bare_apps() -> None:
    assert judge([1.0] * 6, [1.0] * 6, 1.2) == "met"
    # The control (the second bare app) acked faster than the bare app: over it finetune-bot is at 1.25.
    assert judge([1.0] * 6, [0.8] * 6, 1.2) == "inconclusive (the two bare apps disagree)"
    assert judge([1.3] * 6, [1.0] * 6, 1.2) == "NOT met"
    # Met over the bare app (1.0-1.1), straddling over the control (0.91-1.22): not met over both.
    assert judge([1.0, 1.1] * 3, [1.1, 0.9] * 3, 1.2) == "inconclusive"
    assert judge([1.0, 1.1, 1.3] * 2, [1.0] * 6, 1.2) == "inconclusive"  # the interval straddles the target
