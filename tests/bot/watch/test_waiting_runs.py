"""Waiting runs cost a tick nothing unless Polyaxon changed them: counted on the real local Polyaxon server.

The watcher's Polyaxon traffic goes through a counting proxy; the runs are non-managed (the agent executes
nothing), set `queued` in Polyaxon and recorded `queued` in the bot's database. Seeded in quick succession,
they all sit within the change feed's overlap of the newest change, so every idle tick lists them again: before
the fix each one cost a conditions request per idle tick (2 requests with 10 queued runs, 5 with 40 in issue 34).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from polyaxon.client import RunClient
from pydantic import SecretStr

from bot.catalog import Catalog
from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack import SlackStandIn
from bot.metrics import BotMetrics
from bot.polyaxon import PolyaxonGateway
from bot.runs import RunService
from bot.settings import FinetuneSettings, PolyaxonSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from bot.watch import Watcher
from storage.db import SessionFactory, make_engine
from tests.fixtures import polyaxon as plx
from tests.fixtures.db import migrate
from tests.fixtures.runs import create_run

pytestmark = pytest.mark.polyaxon

polyaxon_stack = plx.polyaxon_stack

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


def seed_queued(stack: LocalPolyaxonStack, project: str, count: int) -> list[str]:
    """`count` non-managed runs that Polyaxon shows `queued` (dropped status writes repeated until they hold)."""
    seeding = PolyaxonGateway(host=stack.host, token=None, project=project, timeout_s=30)
    seeding.ensure_project()
    uuids = []
    for i in range(count):
        run = RunClient(owner="default", project=project, client=seeding._client)
        for attempt in range(20):  # the sandbox answers a spurious 405 to a few overlapping writes
            try:
                run.create(name=f"waiting-{i}", is_managed=False)
                break
            except Exception:
                time.sleep(0.2 * (attempt + 1))
        uuids.append(run.run_uuid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        shown = {info.uuid: info.status for info in seeding.list_runs(limit=count + 10)}
        lagging = [uuid for uuid in uuids if shown.get(uuid) != "queued"]
        if not lagging:
            wait_until_quiet(seeding)
            seeding.close()
            return uuids
        for uuid in lagging:
            RunClient(owner="default", project=project, run_uuid=uuid, client=seeding._client).log_status("queued")
        time.sleep(0.5)
    raise AssertionError(f"{len(lagging)} of {count} runs never showed queued in Polyaxon")


def wait_until_quiet(gateway: PolyaxonGateway) -> None:
    """The client sends status writes from a thread pool: some land after the status shows, moving `updated_at`
    (a waiting run they move costs its next tick a request, rightly). Wait until nothing changes for 2 s."""
    last = gateway.last_change()
    for _ in range(30):
        time.sleep(2)
        newest = gateway.last_change()
        if newest == last:
            return
        last = newest
    raise AssertionError("Polyaxon kept changing the seeded runs for 60 s")


def tick_requests(stack: LocalPolyaxonStack, standin: SlackStandIn, tmp: Path, count: int) -> list[int]:
    """Polyaxon requests of a new watcher's first tick and of three idle ticks, with `count` queued runs."""
    project = plx.unique_name(f"waiting{count}")
    uuids = seed_queued(stack, project, count)
    engine = make_engine(f"sqlite:///{tmp / f'waiting-{count}.db'}")
    migrate(engine)
    sessions = SessionFactory(engine)
    with sessions() as s:
        for i, uuid in enumerate(uuids):
            create_run(
                s,
                f"waiting-{count}-{i}",
                status="queued",
                polyaxon_uuid=uuid,
            )
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        polyaxon=PolyaxonSettings(host=stack.host, project=project),
        finetune=FinetuneSettings(database_url=str(engine.url), catalog_dir=REPO / "manifests"),
    )
    requests = []
    with plx.CountingProxy(stack.host) as proxy:
        gateway = PolyaxonGateway(host=proxy.host, token=None, project=project, timeout_s=30)
        runs = RunService(
            settings=settings,
            sessions=sessions,
            catalog=Catalog.load(REPO / "manifests"),
            gateway=gateway,
            client=build_web_client(settings, BotMetrics()),
            clock=lambda: datetime.now(UTC),
        )
        watcher = Watcher(runs=runs, clock=lambda: datetime.now(UTC), stuck_after=timedelta(hours=1))
        for _ in range(4):
            proxy.requests.clear()
            stats = watcher.tick()
            assert stats.errors == [] and stats.transitions == 0, stats
            assert stats.polyaxon_requests == len(proxy.requests), proxy.requests
            requests.append(len(proxy.requests))
        gateway.close()
    engine.dispose()
    return requests


def test_an_idle_tick_costs_one_request_whatever_the_number_of_waiting_runs(
    polyaxon_stack: LocalPolyaxonStack, standin: SlackStandIn, tmp_path: Path
) -> None:
    few, many = (tick_requests(polyaxon_stack, standin, tmp_path, count) for count in (3, 12))
    # A new process's first tick: the cursor, the list, and each waiting run's conditions once (what it waits
    # for may have changed while no watcher ran).
    assert (few[0], many[0]) == (2 + 3, 2 + 12)
    # Idle ticks: the list of changes, whatever the number of waiting runs.
    assert few[1:] == many[1:] == [1, 1, 1]
