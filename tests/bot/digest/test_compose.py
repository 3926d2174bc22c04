"""compose_digest is pure: table-driven cases over plain data, no scheduler, no Slack."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.digest.compose import (
    MAX_BLOCKS,
    MAX_SECTION_CHARS,
    DigestApproval,
    DigestData,
    DigestRegistration,
    DigestRun,
    best_runs,
    compose_digest,
)

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
SINCE = NOW - timedelta(days=1)
A, B = "a" * 64, "b" * 64


def run(name: str, status: str = "succeeded", **kw: Any) -> DigestRun:
    fields: dict[str, Any] = {
        "name": name,
        "recipe": "sft-tiny",
        "status": status,
        "requester": "U0ALICE01",
        "created_at": NOW - timedelta(hours=5),
        "finished_at": NOW - timedelta(hours=1) if status in {"succeeded", "failed", "stopped"} else None,
        "eval_contract_hash": A,
        "metric_name": "eval_loss",
    }
    fields.update(kw)
    return DigestRun(**fields)


def text_of(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


CASES: list[tuple[str, DigestData, list[str], list[str]]] = [
    (
        "nothing-happened",
        DigestData(channel="C1", since=SINCE),
        ["No runs since 2026-12-01 09:00 UTC"],
        ["Finished", "Failed"],
    ),
    (
        "finished-failed-stopped-stuck",
        DigestData(
            channel="C1",
            since=SINCE,
            runs=[
                run("ok-1", metric_value=1.5),
                run("bad-1", "failed"),
                run("halt-1", "stopped"),
                run("slow-1", "running", stuck=True),
            ],
        ),
        ["Finished* (1)", "ok-1", "Failed* (1)", "bad-1", "Stopped* (1)", "halt-1", "Stuck* (1)", "slow-1"],
        ["No runs since"],
    ),
    (
        "old-runs-are-not-repeated",
        DigestData(channel="C1", since=SINCE, runs=[run("old-1", finished_at=SINCE - timedelta(hours=1))]),
        ["No runs since"],
        ["old-1"],
    ),
    (
        "best-per-recipe-never-across-contracts",
        DigestData(
            channel="C1",
            since=SINCE,
            runs=[
                run("a-worse", metric_value=2.0),
                run("a-best", metric_value=1.0),
                run("b-only", metric_value=0.1, eval_contract_hash=B),
            ],
        ),
        ["*sft-tiny*: `a-best`", "best of 2 on contract `aaaaaaaaaaaa`", "b-only", "best of 1 on contract `bbbb"],
        [],
    ),
    (
        "higher-is-better-metric",
        DigestData(
            channel="C1",
            since=SINCE,
            runs=[
                run("acc-low", metric_name="eval_accuracy", metric_value=0.5, greater_is_better=True),
                run("acc-high", metric_name="eval_accuracy", metric_value=0.9, greater_is_better=True),
            ],
        ),
        ["acc-high` (sft-tiny) by <@U0ALICE01> · eval_accuracy 0.9 — best of 2"],
        [],
    ),
    (
        "non-comparable-listed-apart-not-ranked",
        DigestData(
            channel="C1",
            since=SINCE,
            runs=[run("explore-1", metric_value=0.01, comparable=False, pinned=False)],
        ),
        ["Non-comparable", "explore-1"],
        ["Best run per recipe"],
    ),
    (
        "unpinned-active-run",
        DigestData(channel="C1", since=SINCE, runs=[run("wip-1", "running", comparable=False, pinned=False)]),
        ["Not pinned* (1)", "wip-1"],
        [],
    ),
    (
        "approvals-waiting",
        DigestData(
            channel="C1",
            since=SINCE,
            approvals=[
                DigestApproval(
                    model="tiny-chat",
                    version="v3",
                    run_name="ok-1",
                    requester="U0ALICE01",
                    created_at=NOW - timedelta(hours=26),
                    approved_by=["U0BOB0001"],
                    quorum=2,
                    can_still_approve=["U0CAROL01", "S0APPROVE"],
                )
            ],
        ),
        [
            "Waiting for a decision* (1)",
            "tiny-chat:v3",
            "waiting 26 h",
            "1/2 approvals",
            "<@U0CAROL01>",
            "<!subteam^S0APPROVE>",
        ],
        ["No runs since"],
    ),
    (
        "promotion-waiting",
        DigestData(
            channel="C1",
            since=SINCE,
            approvals=[
                DigestApproval(
                    model="tiny-chat",
                    version="v1",
                    run_name="ok-1",
                    requester="U0ALICE01",
                    created_at=NOW - timedelta(hours=2),
                    quorum=2,
                    can_still_approve=["U0BOB0001"],
                    action="promote",
                    stage="production",
                )
            ],
        ),
        ["Waiting for a decision* (1)", "promote `tiny-chat:v1` to *production*", "0/2 approvals", "<@U0BOB0001>"],
        ["from `ok-1`"],
    ),
    (
        "late-digest-says-so",
        DigestData(channel="C1", since=SINCE, scheduled_for=NOW - timedelta(hours=3)),
        ["was due at 2026-12-02 06:00 UTC and is posted 3 h late"],
        [],
    ),
    (
        "on-time-digest-has-no-banner",
        DigestData(channel="C1", since=SINCE, scheduled_for=NOW - timedelta(minutes=1)),
        [],
        ["late"],
    ),
    (
        "timezone-of-the-schedule",
        DigestData(channel="C1", since=SINCE, timezone="Europe/Berlin"),
        ["since 2026-12-01 10:00 CET"],
        [],
    ),
    (
        "links-to-cards",
        DigestData(channel="C1", since=SINCE, runs=[run("ok-1", link="https://x.slack.com/archives/C1/p1")]),
        ["<https://x.slack.com/archives/C1/p1|ok-1>"],
        [],
    ),
]


@pytest.mark.parametrize(("data", "present", "absent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_compose(data: DigestData, present: list[str], absent: list[str]) -> None:
    blocks = compose_digest(data, NOW)
    body = text_of(blocks)
    for needle in present:
        assert needle in body
    for needle in absent:
        assert needle not in body


def test_long_lists_fit_slack_limits_and_say_what_was_cut() -> None:
    runs = [run(f"run-{i:04d}-{'x' * 60}", status) for i in range(600) for status in ("succeeded", "failed")]
    runs += [run(f"stuck-{i}", "running", stuck=True) for i in range(300)]
    data = DigestData(channel="C1", since=SINCE, runs=runs, more_link="https://x.slack.com/archives/C1")
    blocks = compose_digest(data, NOW)
    assert len(blocks) <= MAX_BLOCKS
    for block in blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= MAX_SECTION_CHARS
    body = text_of(blocks)
    assert "Finished* (600)" in body and "…and 590 more (<https://x.slack.com/archives/C1|see the channel>)" in body
    assert "Stuck* (300)" in body


def test_a_run_and_its_resumes_count_once_in_the_ranking() -> None:
    parent = run("parent", metric_value=0.5, lineage=1, finished_at=NOW - timedelta(hours=3))
    resumed = run("resumed", metric_value=0.9, lineage=1, finished_at=NOW - timedelta(hours=1))
    other = run("other", metric_value=1.2, lineage=3)
    [(recipe, _contract, best, count)] = best_runs([parent, resumed, other])
    assert (recipe, count) == ("sft-tiny", 2)  # two lineages, not three runs
    assert best.name == "resumed"  # a lineage is represented by its newest run


def test_running_runs_and_new_registrations_are_in_the_digest() -> None:
    going = run("going", "running", step=12, max_steps=40)
    queued = run("waiting", "queued")
    registered = DigestRegistration(model="tiny-chat", version="v2", run_name="done", registered_at=NOW)
    text = text_of(
        compose_digest(DigestData(channel="C1", since=SINCE, runs=[going, queued], registrations=[registered]), NOW)
    )
    assert "In progress* (2)" in text and "*running* · step 12/40" in text and "*queued*" in text
    assert "Registered* (1)" in text and "tiny-chat:v2" in text and "from `done`" in text
    assert "No runs since" not in text


def test_a_sweep_is_one_line_with_its_trial_counts_and_best_trial() -> None:
    progress = {
        "planned": 3,
        "succeeded": 3,
        "failed": 0,
        "running": 0,
        "best": {"name": "qs-sweep-t2", "metric": 0.98828, "values": "lr=0.05"},
    }
    sweep = run("qs-sweep", kind="sweep", recipe="quickstart", sweep=progress, sweep_metric="accuracy")
    going = run("qs-sweep-2", "running", kind="sweep", sweep={"planned": 8, "succeeded": 1, "failed": 2})
    text = text_of(compose_digest(DigestData(channel="C1", since=SINCE, runs=[sweep, going]), NOW))
    assert text.count("qs-sweep-t2") == 1
    assert "sweep: 3/3 trials done, 0 failed · best `qs-sweep-t2` (lr=0.05) accuracy 0.9883" in text
    assert "sweep: 1/8 trials done, 2 failed · no trial ranked yet" in text


def test_failed_runs_say_why_and_whether_a_retry_took_over() -> None:
    oom = run("oom-1", "failed", failure="Out of GPU memory")
    preempted = run("spot-1", "failed", failure="Preempted (retried as spot-2)")
    text = text_of(compose_digest(DigestData(channel="C1", since=SINCE, runs=[oom, preempted]), NOW))
    assert "`oom-1` (sft-tiny) by <@U0ALICE01> — Out of GPU memory" in text
    assert "Preempted (retried as spot-2)" in text


def test_a_run_cancelled_while_held_for_a_preflight_skip_is_not_shown_as_waiting() -> None:
    # Issue 33 E: only a run still held waits for a decision; one that ended while held says it was never approved.
    held = run("ddp-held", "awaiting_approval", finished_at=None, validation="awaiting_approval")
    ended = run("ddp-cancelled", "stopped", validation="awaiting_approval")
    text = text_of(compose_digest(DigestData(channel="C1", since=SINCE, runs=[held, ended]), NOW))
    [held_line] = [line for line in text.split("\\n") if "ddp-held" in line]
    [ended_line] = [line for line in text.split("\\n") if "ddp-cancelled" in line]
    assert "held: preflight skip awaiting approval" in held_line
    assert "preflight skip never approved" in ended_line and "awaiting" not in ended_line
