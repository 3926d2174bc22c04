"""Repositories on both backends: runs, transitions, messages, approvals, registrations, digests, audit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from storage import repos
from storage.db import SessionFactory
from storage.models import Run


def _run(s: object, **overrides: object) -> Run:
    fields: dict[str, object] = {
        "name": "sft-tiny-a1b2c3",
        "polyaxon_uuid": "0123456789abcdef0123456789abcdef",
        "recipe_name": "sft-tiny",
        "recipe_hash": "sha256:" + "a" * 64,
        "params": {"learning_rate": 0.001, "max_steps": 20},
        "presets": ["cpu-small"],
        "pins": {"model_revision": "abc123"},
        "eval_contract_hash": "e" * 64,
        "requester": "U111",
        "channel": "C111",
    }
    fields.update(overrides)
    return repos.create_run(s, **fields)  # type: ignore[arg-type]


def test_run_round_trip_and_idempotency_key(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s)
        assert run.id is not None
    with sessions() as s:
        got = repos.get_run_by_name(s, name="sft-tiny-a1b2c3")
        assert got is not None
        assert got.params == {"learning_rate": 0.001, "max_steps": 20}
        assert got.presets == ["cpu-small"]
        assert got.created_at.tzinfo is not None and got.created_at.utcoffset() == timedelta(0)
        with pytest.raises(repos.DuplicateError):
            _run(s)


def test_find_runs_by_uuid_short_uuid_and_name(sessions: SessionFactory) -> None:
    with sessions() as s:
        _run(s)
        _run(s, name="other", polyaxon_uuid="fedcba9876543210fedcba9876543210")
    with sessions() as s:
        assert [r.name for r in repos.find_runs(s, ref="01234567")] == ["sft-tiny-a1b2c3"]
        assert [r.name for r in repos.find_runs(s, ref="0123456789abcdef0123456789abcdef")] == ["sft-tiny-a1b2c3"]
        assert [r.name for r in repos.find_runs(s, ref="other")] == ["other"]
        assert repos.find_runs(s, ref="0123") == []
        # The prefix is a range on the uuid index: its bounds are exact, a neighbour's uuid is not matched.
        _run(s, name="neighbour", polyaxon_uuid="01234568" + "0" * 24)
        assert [r.name for r in repos.find_runs(s, ref="01234567")] == ["sft-tiny-a1b2c3"]
        assert [r.name for r in repos.find_runs(s, ref="0123456f")] == []
        assert [r.name for r in repos.find_runs(s, ref="01234568")] == ["neighbour"]


def test_pending_submissions_are_queried_not_filtered(sessions: SessionFactory) -> None:
    now = datetime.now(UTC)
    with sessions() as s:
        _run(s, name="waiting", polyaxon_uuid=None, status="pending_submit")
        stale = _run(s, name="died", polyaxon_uuid=None, status="submitting")
        _run(s, name="fresh", polyaxon_uuid=None, status="submitting")
        _run(s, name="submitted", status="submitting")
        stale.updated_at = now - timedelta(minutes=10)
        s.add(stale)
    with sessions() as s:
        found = repos.pending_submissions(s, stale_before=now - timedelta(minutes=2))
        assert [r.name for r in found] == ["waiting", "died"]


def test_status_transitions_are_recorded_once(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s)
        assert repos.record_status(s, run, status="queued") is not None
        assert repos.record_status(s, run, status="queued") is None
        repos.record_status(s, run, status="running")
        done = repos.record_status(s, run, status="succeeded", message="done")
        assert done is not None and done.previous_status == "running"
        assert run.finished_at is not None
        assert run.id is not None
        events = repos.list_status_events(s, run_id=run.id)
        assert [e.status for e in events] == ["queued", "running", "succeeded"]
        assert repos.list_active_runs(s) == []


def test_resume_links_parent(sessions: SessionFactory) -> None:
    with sessions() as s:
        parent = _run(s)
        child = _run(s, name="child", polyaxon_uuid=None, parent_run_id=parent.id)
        assert repos.get_run(s, run_id=child.id or 0) is not None
        assert child.parent_run_id == parent.id
        assert [r.name for r in repos.list_active_runs(s, requester="U111")] == ["sft-tiny-a1b2c3", "child"]


def test_posted_messages_map_ts_to_run(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s)
        repos.record_posted_message(s, channel="C111", ts="1700000000.000100", purpose="card", run_id=run.id)
    with sessions() as s:
        msg = repos.get_posted_message(s, channel="C111", ts="1700000000.000100")
        assert msg is not None and msg.purpose == "card" and msg.run_id == run.id
        assert repos.get_posted_message(s, channel="C222", ts="1700000000.000100") is None


def test_approvals_add_revoke_reactivate(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s)
        req = repos.create_approval_request(
            s,
            run_id=run.id,
            model="tiny",
            requester="U111",
            channel="C111",
            message_ts="1.2",
            candidate_digest="d" * 64,
        )
        assert req.id is not None
        assert repos.add_approval(s, request_id=req.id, user="U2", reaction="white_check_mark", message_ts="1.2")
        assert (
            repos.add_approval(s, request_id=req.id, user="U2", reaction="white_check_mark", message_ts="1.2") is None
        )
        assert repos.revoke_approval(s, request_id=req.id, user="U2") is not None
        assert repos.revoke_approval(s, request_id=req.id, user="U2") is None
        assert repos.active_approvals(s, request_id=req.id) == []
        assert repos.add_approval(s, request_id=req.id, user="U2", reaction="white_check_mark", message_ts="1.2")
        assert [a.user for a in repos.active_approvals(s, request_id=req.id)] == ["U2"]
        found = repos.get_approval_request_by_message(s, channel="C111", message_ts="1.2")
        assert found is not None and found.id == req.id


def test_registration_is_unique_per_model_version(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s)
        repos.create_registration(s, model="tiny", version="v1", run_id=run.id, artifacts=["outputs/model"])
        with pytest.raises(repos.DuplicateError):
            repos.create_registration(s, model="tiny", version="v1", run_id=run.id, artifacts=[])


def test_digest_schedule_upsert_and_delete(sessions: SessionFactory) -> None:
    with sessions() as s:
        repos.upsert_digest_schedule(s, channel="C1", cron="0 9 * * *", timezone="UTC", created_by="U1")
        repos.upsert_digest_schedule(s, channel="C1", cron="30 8 * * 1", timezone="Europe/Berlin", created_by="U2")
    with sessions() as s:
        (only,) = repos.list_digest_schedules(s)
        assert (only.cron, only.timezone, only.created_by) == ("30 8 * * 1", "Europe/Berlin", "U2")
        assert repos.delete_digest_schedule(s, channel="C1")
        assert not repos.delete_digest_schedule(s, channel="C1")


def test_audit_entries_newest_first(sessions: SessionFactory) -> None:
    with sessions() as s:
        repos.add_audit(s, user="U1", command="/finetune recipes", outcome="ok", channel="C1")
        repos.add_audit(s, user="U1", command="/finetune run recipe=nope", outcome="refused", detail="no recipe")
    with sessions() as s:
        entries = repos.list_audit(s, user="U1")
        assert [e.outcome for e in entries] == ["refused", "ok"]


def test_naive_datetimes_are_refused(sessions: SessionFactory) -> None:
    with pytest.raises(Exception, match="naive datetime"), sessions() as s:
        run = _run(s)
        repos.update_run(s, run, started_at=datetime(2026, 1, 1))
    with sessions() as s:
        run = _run(s, name="aware")
        repos.update_run(s, run, started_at=datetime(2026, 1, 1, tzinfo=UTC))
        assert run.started_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_a_lineage_is_its_root_and_every_resume_below_it(sessions: SessionFactory) -> None:
    with sessions() as s:
        root = _run(s, name="root", polyaxon_uuid=None)
        child = _run(s, name="child", polyaxon_uuid=None, parent_run_id=root.id)
        grandchild = _run(s, name="grandchild", polyaxon_uuid=None, parent_run_id=child.id)
        alone = _run(s, name="alone", polyaxon_uuid=None)
        s.commit()
        ids = [root.id or 0, child.id or 0, grandchild.id or 0, alone.id or 0]
    with sessions() as s:
        roots = repos.lineage_roots(s, run_ids=ids)
    assert roots == {ids[0]: ids[0], ids[1]: ids[0], ids[2]: ids[0], ids[3]: ids[3]}
    with sessions() as s:
        assert repos.lineage_roots(s, run_ids=[]) == {}
