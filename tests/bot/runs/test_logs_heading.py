"""`/finetune logs` says how many lines it shows of how many the log holds, and why fewer than asked."""

from __future__ import annotations

import pytest

from bot.runs.control import logs_heading


@pytest.mark.parametrize(
    ("shown", "fetched", "total", "asked", "heading"),
    [
        (15, 15, 41, 15, "Last 15 of 41 log lines"),
        (
            23,
            30,
            41,
            30,
            "Last 23 of 41 log lines (the 7 before these, to 30 asked, are in the attached file: "
            "a message holds 3,500 bytes)",
        ),
        (41, 41, 41, 50, "All 41 log lines (asked for 50; the log holds no more, blank lines are not kept)"),
        (41, 41, 41, 41, "All 41 log lines"),
        (
            23,
            41,
            41,
            100,
            "Last 23 of 41 log lines (asked for 100; the log holds no more, blank lines are not kept; "
            "the 18 before these are in the attached file: a message holds 3,500 bytes)",
        ),
        (1, 1, 1, 5, "All 1 log line (asked for 5; the log holds no more, blank lines are not kept)"),
    ],
    ids=["fewer-than-the-log", "size-cap", "log-shorter", "exactly-all", "both", "one-line"],
)
def test_the_heading_says_the_real_counts_and_why_fewer(
    shown: int, fetched: int, total: int, asked: int, heading: str
) -> None:
    assert logs_heading(shown=shown, fetched=fetched, total=total, asked=asked) == heading
