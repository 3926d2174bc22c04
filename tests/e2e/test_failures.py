"""When runs go wrong, through the front door on the real local Polyaxon: a preempted run resumes as attempt 2 on
the same card, a code error is named and never retried, a run that cannot start is stopped at its deadline, and
the requester is mentioned once per final state.

The test catalog is the shipped one plus recipes with a `retry:` policy and a preset Polyaxon holds (an operation
that is not approved never starts, locally as on a cluster).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack.server import BOT_USER_ID
from storage import repos
from storage.models import Run
from tests.e2e.conftest import ALICE, CHANNEL, REPO, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for
from tests.manifests.catalog_repo import copy_manifests

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

ALERTS = "C0ALERTS1"
RETRY = {"max": 2, "on": ["preempted", "node_lost"]}


def _test_catalog(root: Path) -> Path:
    """Shipped catalog + `sft-tiny-retry`, `sft-tiny-broken` (bf16 on CPU: a code error) and a `held` preset."""
    catalog = root / "manifests"
    copy_manifests(catalog)
    recipe: dict[str, Any] = yaml.safe_load((REPO / "manifests/recipes/sft-tiny.yaml").read_text())
    # The test catalog lives elsewhere: point the local pins at the repository's files.
    recipe["model"] = {**recipe["model"], "path": str(REPO / recipe["model"]["path"])}
    recipe["dataset"] = {**recipe["dataset"], "path": str(REPO / recipe["dataset"]["path"])}
    recipe["code"] = {"path": str(REPO / recipe["code"]["path"])}
    recipe.pop("serving", None)
    retry = {**recipe, "name": "sft-tiny-retry", "description": "sft-tiny, retried when preempted.", "retry": RETRY}
    retry["notify"] = ALERTS
    (catalog / "recipes/sft-tiny-retry.yaml").write_text(yaml.safe_dump(retry))
    broken = {**retry, "name": "sft-tiny-broken", "description": "sft-tiny with bf16 on a CPU: a code error."}
    broken["defaults"] = {**recipe["defaults"], "bf16": True}
    (catalog / "recipes/sft-tiny-broken.yaml").write_text(yaml.safe_dump(broken))
    held = {
        "name": "held",
        "description": "Held for approval in Polyaxon: never starts unless approved; the bot gives it 3 s.",
        "kind": "operation",
        "isPreset": True,
        "isApproved": False,
        "maxPending": "3s",
        "family": "placement",
    }
    (catalog / "presets/held.yaml").write_text(yaml.safe_dump(held))
    return catalog


@pytest.fixture(scope="module")
def bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    folder = tmp_path_factory.mktemp("failures")
    with start_live_bot(polyaxon_stack, folder, catalog_dir=_test_catalog(folder)) as live:
        live.standin.add_channel(ALERTS, "ml-alerts", members=[ALICE, BOT_USER_ID])
        yield live


def attempts_of(bot: LiveBot, first: Run) -> list[Run]:
    with bot.runtime.services.sessions() as s:
        runs = repos.list_recent_runs(s, limit=200)
    return sorted((r for r in runs if r.id == first.id or r.first_attempt_id == first.id), key=lambda r: r.attempt)


def polyaxon_runs_named(bot: LiveBot, name: str) -> list[str]:
    gateway = bot.runtime.services.gateway
    return [info.uuid for info in gateway.list_runs(limit=100) if info.name == name]


def mentions(bot: LiveBot, run: Run) -> list[str]:
    return [text for text in bot.thread(run) if f"<@{ALICE}>" in text]


def test_a_run_killed_from_outside_resumes_as_attempt_2_on_the_same_card_and_succeeds(
    bot: LiveBot, polyaxon_stack: LocalPolyaxonStack
) -> None:
    before = len(bot.standin.messages(CHANNEL))
    name = run_name_in(bot.command("run recipe=sft-tiny-retry max_steps=160 save_steps=10 logging_steps=5"))
    # Once a complete checkpoint is reported, SIGKILL the job's whole process group from outside: a preemption.
    first = wait_for(lambda: (r := bot.run_named(name)).checkpoint_step is not None and r, timeout=240, interval=0.2)
    assert first.status == "running" and first.polyaxon_uuid
    record = polyaxon_stack.layout.jobs / f"{first.polyaxon_uuid}.json"
    pgid = int(yaml.safe_load(record.read_text())["pgid"])
    os.killpg(pgid, signal.SIGKILL)

    failed = bot.wait_status(name, {"failed"}, timeout=120)
    assert failed.failure is not None and failed.failure["kind"] == "preempted", failed.failure
    runs = wait_for(lambda: len(got := attempts_of(bot, first)) == 2 and got, timeout=60, interval=0.5)
    second = runs[1]
    assert second.attempt == 2 and second.card_ts == first.card_ts and second.parent_run_id == first.id
    assert second.params["resume_from"] == f"checkpoint-{failed.failure['checkpoint_step']}"
    done = bot.wait_status(second.name, {"succeeded", "failed"}, timeout=300)
    assert done.status == "succeeded", bot.thread(first)

    # One card for both attempts, edited to the newest; its thread tells the class, the retry and the resume.
    assert len(bot.standin.messages(CHANNEL)) == before + 1
    bot.wait_card(first, "succeeded", "attempt 2/3", "Preempted")
    thread = "\n".join(bot.thread(first))
    # As the operator relays a container killed from outside (not OOMKilled): the Job's backoff limit, then the pod.
    assert "*Preempted*" in thread and "ErrorExitCode 137" in thread and "retrying as attempt 2/3" in thread, thread
    assert "Resumed from `checkpoint-" in thread
    # The requester hears the final state once, and nothing about the retried failure; the alerts channel nothing.
    said = mentions(bot, first)
    assert len(said) == 1 and "succeeded" in said[0], said
    assert bot.standin.messages(ALERTS) == []
    # The budget holds whoever tries again: another replica starting the same attempt, or a stale "due" record
    # after a crash, starts nothing (Polyaxon has the name, the database the (first attempt, attempt) pair).
    failures = bot.runtime.watcher.failures  # type: ignore[union-attr]
    assert failures._start_retry(failed) is False
    with bot.runtime.services.sessions() as s:
        row = repos.get_run(s, run_id=first.id or 0)
        assert row is not None and row.failure is not None and row.failure["retry"] == "started"
        repos.update_run(s, row, failure={**row.failure, "retry": "due"})
    failures.retry_due(bot.runtime.services.clock())
    assert len(attempts_of(bot, first)) == 2
    assert len(polyaxon_runs_named(bot, second.name)) == 1


def test_a_traceback_is_named_and_never_retried_and_the_failure_is_routed_once(bot: LiveBot) -> None:
    name = run_name_in(bot.command("run recipe=sft-tiny-broken max_steps=5"))
    run = bot.wait_status(name, {"failed"}, timeout=240)
    assert run.failure is not None and run.failure["kind"] == "code", run.failure
    assert run.failure["retry"] == "no" and "never retried" in run.failure["why"]
    evidence = str(run.failure["evidence"])
    assert "Error" in evidence and ":" in evidence, evidence  # the exception line, quoted
    thread = "\n".join(bot.thread(run))
    assert "*Code error*" in thread and evidence.split(":")[0] in thread, thread
    card = bot.wait_card(run, "failed", "Code error")
    assert "attempt 1/3" in str(card.get("blocks"))
    # Not retried, even after more ticks; the requester is mentioned once; the alerts channel hears it once.
    bot.runtime.watcher.tick()  # type: ignore[union-attr]
    assert len(attempts_of(bot, run)) == 1
    assert len(mentions(bot, run)) == 1
    routed = wait_for(lambda: bot.standin.messages(ALERTS) or None, timeout=30)
    assert len(routed) == 1 and name in reply_text(routed[0]) and f"<@{ALICE}>" not in reply_text(routed[0])
    bot.runtime.watcher.tick()  # type: ignore[union-attr]
    assert len(bot.standin.messages(ALERTS)) == 1


def test_a_run_that_cannot_start_is_stopped_at_its_start_deadline_with_the_reason(bot: LiveBot) -> None:
    dry = reply_text(bot.command("run recipe=sft-tiny-retry preset=held --dry-run"))
    assert "stopped if it has not started 3 s after submission" in dry, dry
    name = run_name_in(bot.command("run recipe=sft-tiny-retry preset=held"))
    run = bot.wait_status(name, {"stopped"}, timeout=120)
    assert run.started_at is None, bot.thread(run)
    assert run.failure is not None and run.failure["kind"] == "start_deadline"
    thread = "\n".join(bot.thread(run))
    assert "Pending approval" in thread and "Not started after" in thread and "preset held" in thread, thread
    bot.wait_card(run, "stopped", "Did not start in time", "waited")
    said = mentions(bot, run)
    assert len(said) == 1 and "stopped" in said[0], said
