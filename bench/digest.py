"""Benchmark: load + compose one channel's digest with 10k runs in the database.

    .venv/bin/python bench/digest.py [--runs 10000] [--recent 200] [--repeats 20] [--json OUT.json]

Prints the wall time of one digest (load from the database + compose the blocks) and the number of SQL
statements it issued, for the full database and for one a tenth the size side by side: the query count must
not grow with the number of runs (target: well under 100 ms, a constant number of queries).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event

from bot.digest import DigestRuntime, compose_digest
from bot.scheduler import build_scheduler
from bot.settings import FinetuneSettings, Settings
from storage.db import SessionFactory, make_engine
from storage.migrate import upgrade
from storage.models import ApprovalRequest, Run

CHANNEL = "C0BENCH01"


class _NoSlack:
    """Digest collection never calls Slack except auth.test for the workspace URL."""

    def auth_test(self) -> dict[str, str]:
        return {"url": "https://bench.slack.com/"}


def seed(url: str, runs: int, recent: int, *, active: int | None = None) -> SessionFactory:
    """A migrated database with `runs` runs in one channel, `recent` of them in the last day.

    A quarter of them running, or only the first `active` when given (the others succeeded, failed or stopped).
    """
    engine = make_engine(url)
    upgrade(engine)
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for i in range(runs):
        age = timedelta(hours=i % recent) if i < recent else timedelta(days=2 + i % 300)
        status = ("succeeded", "failed", "stopped", "running")[i % 4]
        if active is not None:
            status = "running" if i < active else ("succeeded", "failed", "stopped")[i % 3]
        rows.append(
            {
                "name": f"run-{i:06d}",
                "polyaxon_uuid": hashlib.md5(str(i).encode()).hexdigest(),  # uuid-like: prefixes differ
                "recipe_name": f"recipe-{i % 5}",
                "recipe_hash": "h",
                "component": "trl-sft",
                "params": {"learning_rate": 1e-3},
                "presets": ["cpu-small"],
                "pins": {},
                "comparable": i % 7 != 0,
                "eval_contract": {"metrics": ["eval_loss"]},
                "eval_contract_hash": f"{i % 2:064x}",
                "requester": "U0ALICE01",
                "channel": CHANNEL,
                "card_ts": f"{1700000000 + i}.000100",
                "status": status,
                "last_metrics": {"eval_loss": 1.0 + (i % 97) / 100},
                "created_at": now - age - timedelta(hours=1),
                "updated_at": now - age,
                "finished_at": None if status == "running" else now - age,
                "stuck_flagged_at": now - age if status == "running" and i % 50 == 0 else None,
            }
        )
    with engine.begin() as conn:
        conn.execute(Run.__table__.insert(), rows)  # type: ignore[attr-defined]
        conn.execute(
            ApprovalRequest.__table__.insert(),  # type: ignore[attr-defined]
            [
                {
                    "run_id": i + 1,
                    "model": f"model-{i}",
                    "requester": "U0ALICE01",
                    "channel": CHANNEL,
                    "message_ts": f"{1800000000 + i}.000100",
                    "candidate_digest": "d",
                    "criteria": [],
                    "status": "open",
                    "created_at": now - timedelta(hours=i),
                }
                for i in range(min(20, runs))
            ],
        )
    return SessionFactory(engine)


def measure(sessions: SessionFactory, repeats: int) -> tuple[float, int]:
    """Median wall time (ms) of load + compose, and the statements one digest issues."""
    settings = Settings(finetune=FinetuneSettings(approvers=["U0BOB0001", "S0APPROVE"], approval_quorum=2))
    runtime = DigestRuntime(
        settings=settings,
        sessions=sessions,
        client=_NoSlack(),  # type: ignore[arg-type]
        scheduler=build_scheduler(settings, sessions.engine),
        clock=lambda: datetime.now(UTC),
    )
    runtime.workspace_url()
    statements = 0

    def count(*_args: Any) -> None:
        nonlocal statements
        statements += 1

    times = []
    for i in range(repeats):
        event.listen(sessions.engine, "before_cursor_execute", count)
        statements = 0
        start = time.perf_counter()
        now = datetime.now(UTC)
        data = runtime.collect(CHANNEL, now=now, scheduled_for=None, period=timedelta(days=1))
        blocks = compose_digest(data, now)
        times.append((time.perf_counter() - start) * 1000)
        event.remove(sessions.engine, "before_cursor_execute", count)
        if i == 0:
            assert len(blocks) <= 50
    return statistics.median(times), statements


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--recent", type=int, default=200, help="runs in the digest's period")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here (bench.report reads it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = seed(f"sqlite:///{tmp}/big.db", args.runs, args.recent)
        small = seed(f"sqlite:///{tmp}/small.db", args.runs // 10, args.recent)
        big_ms, big_q = measure(big, args.repeats)
        small_ms, small_q = measure(small, args.repeats)
    print(f"digest over {args.runs} runs ({args.recent} in the period): {big_ms:.1f} ms median, {big_q} SQL statements")
    print(f"digest over {args.runs // 10} runs ({args.recent} in the period): {small_ms:.1f} ms, {small_q} statements")
    print(f"ratio {args.runs} vs {args.runs // 10} runs: time {big_ms / small_ms:.2f}x, statements {big_q}/{small_q}")
    if args.json:
        figures = {
            "recent": args.recent,
            "repeats": args.repeats,
            "rows": [
                {"runs": args.runs // 10, "statements": small_q, "ms": round(small_ms, 2)},
                {"runs": args.runs, "statements": big_q, "ms": round(big_ms, 2)},
            ],
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
