"""Benchmark: Polyaxon requests, Slack calls and wall time of one watcher tick with 1, 50 and 500 active runs.

The real local Polyaxon server is seeded with N running runs (non-managed, so the agent executes
nothing), the bot's database with the N matching rows and their cards on the Slack stand-in. The
watcher's Polyaxon traffic goes through a counting HTTP proxy; Slack calls are counted by the stand-in.

Two ticks are measured per N:
- "refresh": every run is due for a refresh of its metrics and last log line (the tick each `metrics_every`);
  a tick refreshes at most MAX_REFRESHES_PER_TICK runs, least recently refreshed first;
- "poll": the next tick, with refreshes throttled: nothing is due except the runs the capped refresh tick
  left (none up to 50 active runs).

    .venv/bin/python bench/watcher.py                 # N = 1, 50, 500
    .venv/bin/python bench/watcher.py --sizes 1 50
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("POLYAXON_NO_CONFIG", "true")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 50, 500])
    args = parser.parse_args()

    from polyaxon.client import RunClient
    from pydantic import SecretStr

    from bot.catalog import Catalog
    from bot.local.polyaxon import LocalPolyaxonStack
    from bot.local.polyaxon.proxy import CountingProxy
    from bot.local.slack import SlackStandIn
    from bot.metrics import BotMetrics
    from bot.polyaxon import PolyaxonGateway
    from bot.runs import RunService
    from bot.settings import FinetuneSettings, PolyaxonSettings, Settings, SlackSettings
    from bot.slack.client import build_web_client
    from bot.watch import MAX_REFRESHES_PER_TICK, Watcher
    from storage import repos
    from storage.db import SessionFactory, make_engine
    from storage.migrate import upgrade

    with tempfile.TemporaryDirectory(prefix="bench-watcher-") as tmp:
        stack = LocalPolyaxonStack(Path(tmp) / "store", workdir=REPO)
        stack.start()
        standin = SlackStandIn().start()
        try:
            rows = []
            for size in args.sizes:
                project = f"bench-{size}-{int(time.time())}"
                seed_gw = PolyaxonGateway(host=stack.host, token=None, project=project, timeout_s=30)
                seed_gw.ensure_project()
                client = seed_gw._client  # the seeding side talks to Polyaxon directly, not through the proxy
                engine = make_engine(f"sqlite:///{Path(tmp) / f'bot-{size}.db'}")
                upgrade(engine)
                sessions = SessionFactory(engine)
                settings = Settings(
                    slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
                    polyaxon=PolyaxonSettings(host=stack.host, project=project),
                    finetune=FinetuneSettings(database_url=str(engine.url), catalog_dir=REPO / "manifests"),
                )
                uuids = []
                for i in range(size):
                    run = RunClient(owner="default", project=project, client=client)
                    for attempt in range(20):
                        try:
                            run.create(name=f"bench-{i}", is_managed=False, tags=["bench"])
                            break
                        except Exception:
                            print(f"seeding: run {i} of {size}, attempt {attempt} failed", file=sys.stderr)
                            time.sleep(0.5 * (attempt + 1))
                    run.log_status("running")
                    uuids.append(run.run_uuid)
                # log_status is fire-and-forget and the sandbox drops ~1-5 % of overlapping writes: make sure
                # every seeded run is running, or the measured tick would also report (real) transitions.
                for _ in range(20):
                    running = {r.uuid for r in seed_gw.list_active_runs() if r.status == "running"}
                    lagging = [u for u in uuids if u not in running]
                    if not lagging:
                        break
                    for uuid in lagging:
                        RunClient(owner="default", project=project, run_uuid=uuid, client=client).log_status("running")
                    time.sleep(1.0)
                else:
                    raise RuntimeError(f"{len(lagging)} seeded runs never reached running")
                with CountingProxy(stack.host) as proxy:
                    gateway = PolyaxonGateway(host=proxy.host, token=None, project=project, timeout_s=30)
                    runs = RunService(
                        settings=settings,
                        sessions=sessions,
                        catalog=Catalog.load(REPO / "manifests"),
                        gateway=gateway,
                        client=build_web_client(settings, BotMetrics()),
                        clock=lambda: datetime.now(UTC),
                    )
                    for i, uuid in enumerate(uuids):
                        with sessions() as s:
                            row = repos.create_run(
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
                                status="running",
                                polyaxon_uuid=uuid,
                            )
                        runs.thread.post_card(row)
                    watcher = Watcher(runs=runs, clock=lambda: datetime.now(UTC), stuck_after=timedelta(hours=1))
                    for label, every in (("refresh", timedelta(0)), ("poll", timedelta(hours=1))):
                        watcher.progress.metrics_every = every
                        proxy.requests.clear()
                        slack_before = len(standin.calls())
                        started = time.perf_counter()
                        stats = watcher.tick()
                        seconds = time.perf_counter() - started
                        rows.append(
                            (size, label, len(proxy.requests), len(standin.calls()) - slack_before, seconds, stats)
                        )
                        if stats.errors:
                            print(f"  errors: {stats.errors[:3]}", file=sys.stderr)
                    gateway.close()
                seed_gw.close()
                engine.dispose()
            header = f"{'active':>6} {'tick':>8} {'polyaxon req':>12} {'refreshed':>9} {'transitions':>11}"
            print(f"{header} {'slack calls':>11} {'seconds':>8}")
            for size, label, requests, slack, seconds, stats in rows:
                print(
                    f"{size:>6} {label:>8} {requests:>12} {stats.refreshed:>9} {stats.transitions:>11} "
                    f"{slack:>11} {seconds:>8.3f}"
                )
            print(
                f"(a tick refreshes at most {MAX_REFRESHES_PER_TICK} runs, least recently refreshed first: with more "
                "active runs the 'poll' tick refreshes the ones the previous tick left)"
            )
        finally:
            standin.stop()
            stack.stop()


if __name__ == "__main__":
    main()
