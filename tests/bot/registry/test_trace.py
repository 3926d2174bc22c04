"""`/finetune trace` tells how a version's run started: the command as typed, the runs it resumed or retried from,
and the checkpoint each loaded. Stored runs and audit entries as the run service and the retries write them."""

from __future__ import annotations

from typing import Any

from bot.registry.trace import chain_of, command_text, origin_lines, started_by
from storage import repos
from storage.db import SessionFactory
from storage.models import Run


def _run(s: Any, name: str, **fields: Any) -> Run:
    base: dict[str, Any] = {
        "recipe_name": "sft-tiny",
        "recipe_hash": "sha256:r",
        "requester": "U0ALICE01",
        "channel": "C1",
        "status": "succeeded",
        "polyaxon_uuid": f"{name}-uuid",
    }
    return repos.create_run(s, name=name, **{**base, **fields})


def test_a_resume_shows_the_resume_as_typed_its_parent_and_the_checkpoint(sessions: SessionFactory) -> None:
    with sessions() as s:
        parent = _run(s, "sft-tiny-aaa", overrides={"max_steps": 30, "lr": 0.003}, params={"max_steps": 30})
        repos.add_audit(s, user="U0ALICE01", command="run recipe=sft-tiny", outcome="ok", run_id=parent.id)
        child = _run(
            s,
            "sft-tiny-bbb",
            parent_run_id=parent.id,
            overrides={"max_steps": 60, "lr": 0.003},
            params={"max_steps": 60, "resume_from": "checkpoint-30"},
            requester="U0BOB0001",
        )
        repos.add_audit(s, user="U0BOB0001", command="resume sft-tiny-aaa latest", outcome="ok", run_id=child.id)
        links = chain_of(s, child, list(repos.list_audit_for_run(s, run_id=child.id or 0)))
    assert [link.run.name for link in links] == ["sft-tiny-bbb", "sft-tiny-aaa"]
    # The resume as typed, not the run command its overrides would make (`run recipe=sft-tiny max_steps=60`).
    assert command_text(links[0]) == "`/finetune resume sft-tiny-aaa max_steps=60`"
    assert started_by(links[0]).startswith("by <@U0BOB0001> at ")
    [origin] = origin_lines(links)
    assert origin.startswith(
        "• `sft-tiny-bbb` started from `checkpoint-30` of `sft-tiny-aaa` (`sft-tiny-aaa-uuid`, succeeded), "
        "itself started with `/finetune run recipe=sft-tiny lr=0.003 max_steps=30` by <@U0ALICE01> at "
    ), origin


def test_a_resume_of_a_chosen_checkpoint_and_a_retry_of_that_resume_walk_the_whole_chain(
    sessions: SessionFactory,
) -> None:
    with sessions() as s:
        root = _run(s, "sft-tiny-r00", status="stopped", overrides={"max_steps": 200})
        repos.add_audit(s, user="U0ALICE01", command="run recipe=sft-tiny", outcome="ok", run_id=root.id)
        resumed = _run(
            s,
            "sft-tiny-r01",
            status="failed",
            parent_run_id=root.id,
            overrides={"max_steps": 200},
            params={"resume_from": "checkpoint-10"},
        )
        repos.add_audit(s, user="U0ALICE01", command="resume sft-tiny-r00 step-10", outcome="ok", run_id=resumed.id)
        retry = _run(
            s,
            "sft-tiny-r02",
            parent_run_id=resumed.id,
            attempt=2,
            first_attempt_id=resumed.id,
            overrides={"max_steps": 200},
            params={"resume_from": "checkpoint-40"},
        )
        repos.add_audit(
            s, user="finetune-bot", command="retry sft-tiny-r01 as attempt 2/3", outcome="ok", run_id=retry.id
        )
        links = chain_of(s, retry, list(repos.list_audit_for_run(s, run_id=retry.id or 0)))
    assert command_text(links[0]) == "automatic retry: attempt 2 after `sft-tiny-r01` failed"
    assert started_by(links[0]).startswith("by the bot at ")
    # The checkpoint asked for is kept; the schedule was not changed, so it is not shown as typed.
    assert command_text(links[1]) == "`/finetune resume sft-tiny-r00 checkpoint=step-10`"
    first, second = origin_lines(links)
    assert "`sft-tiny-r02` started from `checkpoint-40` of `sft-tiny-r01` (`sft-tiny-r01-uuid`, failed)" in first
    assert "itself started with `/finetune resume sft-tiny-r00 checkpoint=step-10`" in first
    assert "`sft-tiny-r01` started from `checkpoint-10` of `sft-tiny-r00`" in second
    assert "`/finetune run recipe=sft-tiny max_steps=200`" in second


def test_a_run_from_the_beginning_has_no_origin(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s, "quickstart-1", recipe_name="quickstart", overrides={"epochs": 3})
        repos.add_audit(s, user="U0ALICE01", command="run recipe=quickstart", outcome="ok", run_id=run.id)
        links = chain_of(s, run, list(repos.list_audit_for_run(s, run_id=run.id or 0)))
    assert command_text(links[0]) == "`/finetune run recipe=quickstart epochs=3`"
    assert origin_lines(links) == []
