"""No gate takes evidence from a run Polyaxon no longer has: a lost preflight, a lost confirmed run."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr
from slack_sdk import WebClient

from bot.catalog import Catalog
from bot.grammar import RunCommand
from bot.runs.gate import PreflightGate
from bot.settings import Settings, SlackSettings
from bot.slack.people import People
from storage import repos
from storage.db import SessionFactory
from storage.models import Run
from tests.fixtures.slack import load_catalog


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """The shipped catalog."""
    return load_catalog()  # type: ignore[no-any-return]


def _run(s: Any, name: str, **fields: Any) -> Run:
    values: dict[str, Any] = {
        "polyaxon_uuid": name.replace("-", "")[:32].ljust(32, "0"),
        "recipe_name": "sft-tiny-ddp",
        "recipe_hash": "sha256:" + "a" * 64,
        "params": {},
        "presets": ["ddp-cpu-2"],
        "pins": {},
        "requester": "U111",
        "channel": "C111",
        "status": "succeeded",
        **fields,
    }
    return repos.create_run(s, name=name, **values)


def gate(sessions: SessionFactory) -> PreflightGate:
    settings = Settings(slack=SlackSettings(bot_token=SecretStr("xoxb-gate-test"), signing_secret=SecretStr("s" * 32)))
    return PreflightGate(sessions, People(settings=settings, client=WebClient(token="xoxb-gate-test")))


def test_a_lost_preflight_is_no_evidence_and_the_refusal_says_why(sessions: SessionFactory, catalog: Catalog) -> None:
    cmd = RunCommand(recipe="sft-tiny-ddp")
    plan = catalog.plan(cmd, require_local=False)
    assert plan.distributed and plan.gate_key
    with sessions() as s:
        run = _run(s, "sft-tiny-ddp-preflight-1", kind="preflight")
        row = repos.create_preflight(
            s, gate_key=plan.gate_key, recipe_name=plan.recipe, presets=plan.presets, pins=plan.pins,
            run_id=run.id, requester="U111", channel="C111",
        )  # fmt: skip
        repos.finish_preflight(s, row, status="passed", report={"passed": True, "lines": []})
    assert gate(sessions).verdict(plan, cmd, user="U111").allowed
    with sessions() as s:
        fresh = repos.get_run(s, run_id=run.id or 0)
        assert fresh is not None
        repos.record_status(s, fresh, status=repos.LOST_STATUS)
    verdict = gate(sessions).verdict(plan, cmd, user="U111")
    assert not verdict.allowed and verdict.refusal is not None
    assert "`sft-tiny-ddp-preflight-1`" in verdict.refusal and "Polyaxon no longer has its run" in verdict.refusal
    assert "/finetune preflight recipe=sft-tiny-ddp" in verdict.refusal


def test_a_lost_confirmed_run_is_no_smoke_test_for_a_sweep(sessions: SessionFactory) -> None:
    with sessions() as s:
        confirmed = _run(s, "quickstart-1", recipe_name="quickstart", kind="train")
        repos.update_run(s, confirmed, outputs_confirmed_at=confirmed.created_at)
        assert repos.confirmed_run_with_pins(s, recipe_name="quickstart", pins={}) is not None
        assert [r.name for r in repos.measured_runs(s, recipe_name="quickstart")] == ["quickstart-1"]
        repos.record_status(s, confirmed, status=repos.LOST_STATUS)
        assert repos.confirmed_run_with_pins(s, recipe_name="quickstart", pins={}) is None
        # Nor is it measured for an estimate: the usage service's sample comes from these.
        assert list(repos.measured_runs(s, recipe_name="quickstart")) == []
