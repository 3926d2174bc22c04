"""Each person's notification default and the requester's direct messages, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from storage import repos
from storage.db import SessionFactory
from storage.models import utcnow
from tests.storage.test_repos import _run


def test_a_preference_is_one_row_per_person_replaced_by_the_next_choice(sessions: SessionFactory) -> None:
    with sessions() as s:
        assert repos.get_notify_preference(s, user="U0ALICE01") is None
        repos.set_notify_preference(s, user="U0ALICE01", notify="dm")
    with sessions() as s:
        repos.set_notify_preference(s, user="U0ALICE01", notify="both")
        repos.set_notify_preference(s, user="U0BOB0001", notify="thread")
    with sessions() as s:
        assert repos.get_notify_preference(s, user="U0ALICE01") == "both"
        assert repos.get_notify_preference(s, user="U0BOB0001") == "thread"


def test_a_notice_is_claimed_once_per_run_and_reason_and_listed_until_sent(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = _run(s)
    with sessions() as s:
        first = repos.claim_requester_notice(s, run_id=run.id or 0, reason="succeeded", text="done")
        assert first is not None
        assert repos.claim_requester_notice(s, run_id=run.id or 0, reason="succeeded", text="again") is None
        assert repos.claim_requester_notice(s, run_id=run.id or 0, reason="stuck", text="stuck") is not None
    with sessions() as s:
        assert repos.unsent_requester_notices(s, before=utcnow() - timedelta(minutes=1)) == []
        unsent = repos.unsent_requester_notices(s, before=utcnow() + timedelta(seconds=1))
        assert [(n.reason, n.text, r.name) for n, r in unsent] == [
            ("succeeded", "done", run.name),
            ("stuck", "stuck", run.name),
        ]
        repos.mark_requester_notice_sent(s, notice_id=first, channel="D0ALICE01", ts="1.000001")
    with sessions() as s:
        assert [n.reason for n, _ in repos.unsent_requester_notices(s, before=utcnow() + timedelta(seconds=1))] == [
            "stuck"
        ]
        sent = repos.get_requester_notice(s, run_id=run.id or 0, reason="succeeded")
        assert sent is not None and sent.ts == "1.000001" and sent.sent_at is not None
