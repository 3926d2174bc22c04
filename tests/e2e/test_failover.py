"""Two replicas on one PostgreSQL database: the watcher runs on the lease holder only, and moves on a SIGKILL."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack import SlackSender, SlackStandIn
from storage.db import SessionFactory, make_engine
from storage.leases import lease_holder
from storage.migrate import upgrade
from storage.models import utcnow
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, serve_env
from tests.e2e.test_restart import ServeProcess, assert_told_once, newest_run
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer, pytest.mark.postgres]

LEASE_TTL_S = 5


def test_the_other_replica_takes_over_the_watcher_when_the_holder_is_killed(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, pg_schema_url: str, tmp_path: Path
) -> None:
    standin = SlackStandIn().start()
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    sessions = SessionFactory(engine)
    env = serve_env(standin, polyaxon_stack.host, pg_schema_url, project=f"failover-{uuid.uuid4().hex[:8]}")
    env["FINETUNE_WATCH_LEASE_TTL_S"] = str(LEASE_TTL_S)  # a dead holder's watcher moves on within 5 s + 1 tick
    first, second = ServeProcess(env, tmp_path / "a.log"), ServeProcess(env, tmp_path / "b.log")
    try:
        first.start()
        second.start()

        def holder_pid() -> int | None:
            with sessions() as s:
                holder = lease_holder(s, name="watcher", now=utcnow())
            return int(holder.split(":")[1]) if holder else None

        pid = wait_for(holder_pid, timeout=30)
        assert first.proc is not None and second.proc is not None
        leader, follower = (first, second) if first.proc.pid == pid else (second, first)
        assert follower.proc is not None and follower.proc.pid != pid
        sender = SlackSender(follower.url, SIGNING_SECRET, standin=standin)
        sent = sender.slash_command("run recipe=sft-tiny max_steps=60", user_id=ALICE, channel_id=CHANNEL)
        assert sent.status == 200

        wait_for(lambda: (r := newest_run(sessions)) is not None and r.status == "running", timeout=120, interval=0.3)
        leader.kill9()
        killed_at = time.monotonic()
        # Bounded hand-over: the lease's ttl plus a tick (generous bound for a loaded 2-core CI machine).
        wait_for(lambda: holder_pid() == follower.proc.pid, timeout=LEASE_TTL_S + 20, interval=0.2)
        print(f"watcher taken over {time.monotonic() - killed_at:.1f} s after SIGKILL (lease ttl {LEASE_TTL_S} s)")
        final = wait_for(
            lambda: (r := newest_run(sessions)) is not None and r.status == "succeeded" and r, timeout=240, interval=0.5
        )
        assert holder_pid() == follower.proc.pid, "the surviving replica holds the watcher lease"
        assert_told_once(standin, sessions, final)
    finally:
        first.stop()
        second.stop()
        engine.dispose()
        standin.stop()
