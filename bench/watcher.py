"""Benchmark: Polyaxon requests, Slack calls and wall time of a watcher tick at 1, 50, 500 and 10,000 running runs,
with runs waiting to start beside them (a tenth as many, by default).

Up to `--real-max` running runs (500 by default) Polyaxon is the real local server, seeded with N running runs
and `--waiting` x N queued ones (at least one; non-managed: the agent executes nothing; the queued ones seeded
last, in one burst, so that several sit within the change feed's overlap of the newest change); beyond, a stub
answering Polyaxon's run API in its own shape (bench/polyaxon_stub.py: seeding the real server with 10,000 runs
takes longer than the bench should). The bot's database holds the matching rows (`running` and `queued`). The
watcher's Polyaxon traffic goes through a counting HTTP proxy; Slack calls are counted by the Slack stand-in.

Three ticks are measured per N:
- "first": a new process's first tick, which lists every active run (one request per 1,000, plus the cursor)
  and reads each waiting run's conditions once (what it waits for may have changed while no watcher ran); a
  watcher told them before (an unmeasured tick), as a restarted bot's database has them;
- "idle": the next tick, nothing changed in Polyaxon;
- "busy": `--changes` runs synced new metrics (Polyaxon's outputs sync), one succeeded and one waiting run
  moved to `scheduled` since the last tick.
The targets: "idle" and "busy" make the same number of requests at every N, whatever the number of waiting runs,
and Slack is called only for the cards whose content changed.

    .venv/bin/python bench/watcher.py                        # N = 1, 50, 500 (real server), 10,000 (stub)
    .venv/bin/python bench/watcher.py --sizes 1 50 --real-max 50 --json watcher.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("POLYAXON_NO_CONFIG", "true")

from bench.polyaxon_stub import PolyaxonStub, seeded  # noqa: E402 (after the path and environment are set)


class RealPolyaxon:
    """The local Polyaxon server with `size` running runs and `waiting` queued ones in a project of their own."""

    def __init__(self, host: str, size: int, waiting: int) -> None:
        from polyaxon.client import RunClient

        from bot.polyaxon import PolyaxonGateway

        self.host = host
        self.project = f"bench-{size}-{int(time.time())}"
        self.gateway = PolyaxonGateway(host=host, token=None, project=self.project, timeout_s=30)
        self.gateway.ensure_project()
        self._client = self.gateway._client  # the seeding side talks to Polyaxon directly, not through the proxy
        self._run_client = RunClient
        self.uuids: list[str] = []
        for i in range(size):
            run = RunClient(owner="default", project=self.project, client=self._client)
            _retry(lambda run=run, i=i: run.create(name=f"bench-{i}", is_managed=False, tags=["bench"]))
            run.log_status("running")
            self.uuids.append(run.run_uuid)
        self.waiting: list[str] = []
        for i in range(size, size + waiting):
            run = RunClient(owner="default", project=self.project, client=self._client)
            _retry(lambda run=run, i=i: run.create(name=f"bench-{i}", is_managed=False, tags=["bench"]))
            run.log_status("queued")
            self.waiting.append(run.run_uuid)
        # log_status is fire-and-forget and the sandbox drops a few overlapping writes: make sure every seeded
        # run is in its status before measuring (or the ticks would also report real transitions).
        self.settle(dict.fromkeys(self.uuids, "running") | dict.fromkeys(self.waiting, "queued"))

    def change(self, uuid: str, *, status: str | None = None, outputs: dict[str, Any] | None = None) -> None:
        run = self._run_client(owner="default", project=self.project, run_uuid=uuid, client=self._client)
        if outputs:
            run.log_outputs(**outputs)
        if status:
            run.log_status(status)

    def settle(self, expected: dict[str, str]) -> None:
        """Wait until Polyaxon shows each run with its expected status (asking again for the ones it dropped)."""
        for _ in range(60):
            shown = {r.uuid: r.status for r in self.gateway.list_runs(limit=len(self.uuids) + len(self.waiting) + 10)}
            lagging = [uuid for uuid, status in expected.items() if shown.get(uuid) != status]
            if not lagging:
                self.quiet()
                return
            for uuid in lagging:
                self.change(uuid, status=expected[uuid])
            time.sleep(0.5)
        raise RuntimeError(f"Polyaxon did not show {len(lagging)} runs in their expected status in 30 s")

    def quiet(self, still_s: float = 2.0) -> None:
        """Wait until Polyaxon stops changing the runs: the client sends status writes from a thread pool, so some
        land after the status shows (a waiting run they move would cost a tick a request, rightly)."""
        last = self.gateway.last_change()
        for _ in range(60):
            time.sleep(still_s)
            newest = self.gateway.last_change()
            if newest == last:
                return
            last = newest
        raise RuntimeError(f"Polyaxon kept changing the runs for {60 * still_s:.0f} s")

    def close(self) -> None:
        self.gateway.close()


class StubPolyaxon:
    """The API-shaped stub with `size` running runs and `waiting` queued ones."""

    def __init__(self, size: int, waiting: int) -> None:
        self.stub: PolyaxonStub = seeded(size, waiting)
        self.host = self.stub.host
        self.project = "bench"
        self.uuids = list(self.stub.runs)[:size]
        self.waiting = list(self.stub.runs)[size:]

    def change(self, uuid: str, *, status: str | None = None, outputs: dict[str, Any] | None = None) -> None:
        self.stub.change(uuid, status=status, outputs=outputs)

    def settle(self, expected: dict[str, str]) -> None:
        return

    def close(self) -> None:
        self.stub.stop()


def _retry(call: Callable[[], Any]) -> None:
    for attempt in range(20):
        try:
            call()
            return
        except Exception:
            print(f"seeding: attempt {attempt} failed", file=sys.stderr)
            time.sleep(0.5 * (attempt + 1))
    raise RuntimeError("seeding failed 20 times")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 50, 500, 10_000])
    parser.add_argument("--real-max", type=int, default=500, help="the largest N seeded on the real local server")
    parser.add_argument("--changes", type=int, default=5, help="runs whose metrics move before the busy tick")
    parser.add_argument(
        "--waiting", type=float, default=0.1, help="queued runs seeded per running run (at least 1 unless 0)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here (bench.report reads it)")
    args = parser.parse_args()

    from bot.local.polyaxon import LocalPolyaxonStack
    from bot.local.slack import SlackStandIn

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-watcher-") as tmp:
        stack = LocalPolyaxonStack(Path(tmp) / "store", workdir=REPO) if min(args.sizes) <= args.real_max else None
        if stack is not None:
            stack.start()
        standin = SlackStandIn().start()
        try:
            for size in args.sizes:
                real = stack is not None and size <= args.real_max
                waiting = max(1, round(size * args.waiting)) if args.waiting > 0 else 0
                polyaxon: RealPolyaxon | StubPolyaxon = (
                    RealPolyaxon(stack.host, size, waiting)
                    if real and stack is not None
                    else StubPolyaxon(size, waiting)
                )
                try:
                    for label, requests, slack, seconds, stats in measure(polyaxon, size, args.changes, standin, tmp):
                        rows.append(
                            {
                                "running": size,
                                "waiting": waiting,
                                "polyaxon": "server" if real else "stub",
                                "tick": label,
                                "requests": requests,
                                "slack_calls": slack,
                                "transitions": stats.transitions,
                                "seconds": round(seconds, 4),
                            }
                        )
                finally:
                    polyaxon.close()
        finally:
            standin.stop()
            if stack is not None:
                stack.stop()
    header = f"{'running':>7} {'waiting':>7} {'polyaxon':>8} {'tick':>6} {'requests':>8} {'slack calls':>11}"
    print(f"{header} {'transitions':>11} {'seconds':>8}")
    for r in rows:
        print(
            f"{r['running']:>7} {r['waiting']:>7} {r['polyaxon']:>8} {r['tick']:>6} {r['requests']:>8} "
            f"{r['slack_calls']:>11} {r['transitions']:>11} {r['seconds']:>8.3f}"
        )
    print(
        f"(busy: {args.changes} runs synced new metrics, one succeeded and one waiting run was scheduled; a tick with "
        "no change costs one request, each change adds only what telling it needs: a success's conditions and "
        "metric summary, a waiting run's conditions)"
    )
    if args.json:
        figures = {"changes": args.changes, "waiting_per_running": args.waiting, "rows": rows}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def measure(
    polyaxon: RealPolyaxon | StubPolyaxon, size: int, changes: int, standin: Any, tmp: str
) -> list[tuple[str, int, int, float, Any]]:
    """The three ticks at one N: (label, Polyaxon requests, Slack calls, seconds, TickStats)."""
    from pydantic import SecretStr

    from bot.catalog import Catalog
    from bot.local.polyaxon.proxy import CountingProxy
    from bot.metrics import BotMetrics
    from bot.polyaxon import PolyaxonGateway
    from bot.runs import RunService
    from bot.settings import FinetuneSettings, PolyaxonSettings, Settings, SlackSettings
    from bot.slack.client import build_web_client
    from bot.watch import Watcher
    from storage import repos
    from storage.db import SessionFactory, make_engine
    from storage.migrate import upgrade

    engine = make_engine(f"sqlite:///{Path(tmp) / f'bot-{size}-{int(time.time())}.db'}")
    upgrade(engine)
    sessions = SessionFactory(engine)
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        polyaxon=PolyaxonSettings(host=polyaxon.host, project=polyaxon.project),
        finetune=FinetuneSettings(database_url=str(engine.url), catalog_dir=REPO / "manifests"),
    )
    rows = []
    with CountingProxy(polyaxon.host) as proxy:
        gateway = PolyaxonGateway(host=proxy.host, token=None, project=polyaxon.project, timeout_s=60)
        runs = RunService(
            settings=settings,
            sessions=sessions,
            catalog=Catalog.load(REPO / "manifests"),
            gateway=gateway,
            client=build_web_client(settings, BotMetrics()),
            clock=lambda: datetime.now(UTC),
        )
        changed = polyaxon.uuids[: changes + 1]
        moved = polyaxon.waiting[:1]  # a waiting run Polyaxon schedules before the busy tick
        with sessions() as s:
            for i, uuid in enumerate(polyaxon.uuids + polyaxon.waiting):
                repos.create_run(
                    s,
                    name=f"bench-{size}-{i}",
                    recipe_name="sft-tiny",
                    recipe_hash="bench",
                    component="trl-sft",
                    params={},
                    presets=[],
                    pins={},
                    requester="U0ALICE01",
                    channel="C0TRAIN01",
                    status="queued" if i >= size else "running",
                    polyaxon_uuid=uuid,
                )
        # Cards for the runs that will change (the others are never edited: posting 10,000 would only be slow).
        with sessions() as s:
            for row in repos.list_active_runs(s):
                if row.polyaxon_uuid in changed or row.polyaxon_uuid in moved:
                    runs.thread.post_card(row)
        # A watcher told each waiting run's conditions before this process started (as the database of a restarted
        # bot has them): the first tick measured reads them again and tells nothing new.
        Watcher(runs=runs, clock=lambda: datetime.now(UTC), stuck_after=timedelta(hours=1)).tick()
        watcher = Watcher(runs=runs, clock=lambda: datetime.now(UTC), stuck_after=timedelta(hours=1))
        for label in ("first", "idle", "busy"):
            if label == "busy":
                expected = {uuid: "running" for uuid in changed[:-1]} | {changed[-1]: "succeeded"}
                expected |= dict.fromkeys(moved, "scheduled")
                for n, uuid in enumerate(changed[:-1]):
                    polyaxon.change(uuid, outputs={"loss": 1.0 / (n + 2), "global_step": 10})
                polyaxon.change(changed[-1], status="succeeded")
                for uuid in moved:
                    polyaxon.change(uuid, status="scheduled")
                polyaxon.settle(expected)
                time.sleep(runs.thread.edits.min_interval_s)  # the cards were posted moments ago: let them be edited
            proxy.requests.clear()
            slack_before = len(standin.calls())
            started = time.perf_counter()
            stats = watcher.tick()
            seconds = time.perf_counter() - started
            rows.append((label, len(proxy.requests), len(standin.calls()) - slack_before, seconds, stats))
            if stats.errors:
                print(f"  errors at {size}: {stats.errors[:3]}", file=sys.stderr)
        gateway.close()
    engine.dispose()
    return rows


if __name__ == "__main__":
    main()
