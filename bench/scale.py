"""Benchmark: what a command, a watcher tick and a digest cost at 10, 1,000 and 100,000 runs in the database.

    .venv/bin/python bench/scale.py [--sizes 10 1000 100000] [--repeats 5] [--json OUT.json]

Each size gets its own SQLite database (bench/digest.py's seed: one channel, 200 runs in the digest's period,
10 of them running (9 at 10 runs): a team's history grows, its active runs do not) and the same runs in a stand-in for
Polyaxon's run API (bench/polyaxon_stub.py: the real server cannot be seeded with 100,000 runs in a bench's
time). The bot is built by its own composition root (`build_runtime`), its Polyaxon traffic counted by a proxy.
Measured, as medians over `--repeats`:
- a command: `/finetune status <8-character uuid prefix>` of a finished run, through `compose_reply` (parse,
  resolve, reply, audit);
- a watcher tick with nothing changed in Polyaxon (the first tick, which lists every active run, apart);
- a digest: load and compose the channel's daily digest.
Printed per size: SQL statements, Polyaxon requests and milliseconds of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import event, select  # noqa: E402 (after the path is set)

from bench.digest import CHANNEL, seed  # noqa: E402
from bench.polyaxon_stub import PolyaxonStub  # noqa: E402

ACTIVE = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1_000, 100_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here (bench.report reads it)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        for size in args.sizes:
            started = time.perf_counter()
            rows.append((size, measure(Path(tmp), size, args.repeats)))
            print(f"  {size} runs measured in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(f"{'runs in db':>10} {'what':>12} {'statements':>10} {'requests':>8} {'ms (median)':>11}")
    for size, figures in rows:
        for what, (statements, requests, ms) in figures.items():
            print(f"{size:>10} {what:>12} {statements:>10} {requests:>8} {ms:>11.1f}")
    print(
        f"({ACTIVE} running runs at every size, 9 of 10 at 10; "
        "the first tick lists every active run, later ticks only the changes)"
    )
    if args.json:
        figures = {
            "repeats": args.repeats,
            "active": ACTIVE,
            "rows": [
                {"runs": size, "what": what, "statements": statements, "requests": requests, "ms": round(ms, 2)}
                for size, measured in rows
                for what, (statements, requests, ms) in measured.items()
            ],
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def measure(tmp: Path, size: int, repeats: int) -> dict[str, tuple[int, int, float]]:
    """Statements, Polyaxon requests and median ms of a command, the first tick, a tick and a digest."""
    from pydantic import SecretStr

    from bot.app import build_runtime
    from bot.digest import compose_digest
    from bot.local.polyaxon.proxy import CountingProxy
    from bot.local.slack import SlackStandIn
    from bot.settings import FinetuneSettings, PolyaxonSettings, Settings, SlackSettings
    from handlers.commands import compose_reply
    from storage.models import Run

    url = f"sqlite:///{tmp / f'scale-{size}.db'}"
    sessions = seed(url, size, min(200, size), active=min(ACTIVE, size - 1))
    with sessions.engine.connect() as conn:
        seeded = conn.execute(select(Run.polyaxon_uuid, Run.name, Run.status, Run.created_at)).all()
    sessions.engine.dispose()
    stub = PolyaxonStub().start()
    for uuid, name, status, created_at in seeded:
        stub.add(uuid, name, status=status, at=created_at)
    finished = next(uuid for uuid, _, status, _ in seeded[size // 2 :] if status != "running")
    standin = SlackStandIn().start()
    figures: dict[str, tuple[int, int, float]] = {}
    try:
        with CountingProxy(stub.host) as proxy:
            settings = Settings(
                slack=SlackSettings(
                    bot_token=SecretStr(standin.bot_token),
                    signing_secret=SecretStr("bench-signing-secret"),
                    api_base_url=standin.base_url,
                ),
                polyaxon=PolyaxonSettings(host=proxy.host, project="bench"),
                # The seeded runs have not moved for hours: the stuck check (a database read) still runs, flags none.
                finetune=FinetuneSettings(database_url=url, catalog_dir=REPO / "manifests", stuck_after_s=1e9),
            )
            runtime = build_runtime(settings)
            services, watcher = runtime.services, runtime.watcher
            assert watcher is not None and services.digests is not None
            digests = services.digests
            counter = Counter(runtime.engine, proxy)
            counted = iter(range(1_000_000))

            def command() -> None:
                reply = compose_reply(
                    services,
                    f"status {finished[:8]}",
                    user_id="U0ALICE01",
                    channel_id=CHANNEL,
                    delivery_key=f"bench-{next(counted)}",
                )
                assert "not found" not in str(reply).lower(), reply

            def digest() -> None:
                now = datetime.now(UTC)
                data = digests.collect(CHANNEL, now=now, scheduled_for=None, period=timedelta(days=1))
                compose_digest(data, now)

            figures["command"] = counter.median(command, repeats)
            lease = runtime.lease
            assert lease is not None

            def tick() -> None:
                assert lease.run(watcher.tick) is not None  # as the scheduled job runs it: under the watcher lease

            figures["first tick"] = counter.median(tick, 1)
            figures["tick"] = counter.median(tick, repeats)
            figures["digest"] = counter.median(digest, repeats)
            runtime.stop()
    finally:
        standin.stop()
        stub.stop()
    return figures


class Counter:
    """SQL statements (an engine event) and Polyaxon requests (the proxy) of one call, with its time."""

    def __init__(self, engine: Any, proxy: Any) -> None:
        self.engine = engine
        self.proxy = proxy
        self.statements = 0
        event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *_args: Any) -> None:
        self.statements += 1

    def median(self, call: Callable[[], Any], repeats: int) -> tuple[int, int, float]:
        """The last call's statements and requests (they do not vary), and the median milliseconds."""
        times = []
        for _ in range(repeats):
            self.statements = 0
            self.proxy.requests.clear()
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        return self.statements, len(self.proxy.requests), statistics.median(times)


if __name__ == "__main__":
    main()
