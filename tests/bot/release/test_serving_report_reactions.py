"""The approval emoji on a serving check's report, through the front door (issue 35, item 5): signed
`reaction_added` events to the real Bolt app on the Slack stand-in, the bot built as `serve` builds it against a
Polyaxon tripwire. The report is posted by the real `ServingChecks.tell` in the version's thread; a passed check's
promotion request follows it there. A ✅ on the report approves nothing: it is answered once in that thread, per
person, with where approvals count; while no request is open, the kinds table's answer goes to the reactor only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select

from bot.local.slack.server import DEFAULT_CHANNEL
from bot.registry.policy import CriterionResult
from storage import repos
from storage.models import Approval, ApprovalRequest, AuditEntry, Run
from tests.fixtures.slack import wait_for
from tests.fixtures.tripwire import TripwireBot, tripwire_bot

SIGNING_SECRET = "serving-report-signing-secret-0123"
CHANNEL = DEFAULT_CHANNEL
ALICE = "U0ALICE01"  # asked for the promotion
BOB = "U0BOB0001"  # approver
CAROL = "U0CAROL01"  # approver
EMOJI = "white_check_mark"


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TripwireBot]:
    """The bot over HTTP on the stand-in, Polyaxon a tripwire (nothing here may reach it)."""
    with tripwire_bot(tmp_path_factory.mktemp("serving-report"), SIGNING_SECRET, approvers=[BOB, CAROL]) as bot:
        yield bot


@dataclass
class Checked:
    version_run: Run
    report_ts: str
    model: str
    check_id: int


def serving_check_reported(bot: TripwireBot) -> Checked:
    """A version registered from a succeeded run, its serving check passed, the report posted by the real
    `ServingChecks.tell` in the version's thread."""
    services = bot.runtime.services
    assert services.runs is not None and services.release is not None
    tag = uuid.uuid4().hex[:6]
    model = f"tiny-{tag}"
    common = {"recipe_name": "sft-tiny", "recipe_hash": "sha256:r", "requester": ALICE, "channel": CHANNEL}
    with services.sessions() as s:
        train = repos.create_run(
            s, name=f"sft-tiny-{tag}", status="succeeded", polyaxon_uuid=uuid.uuid4().hex, **common
        )
    services.runs.thread.post_card(train)
    with services.sessions() as s:
        version_run = repos.get_run(s, run_id=train.id or 0)
        assert version_run is not None and version_run.thread_ts
        serving = repos.create_run(
            s,
            name=f"sft-tiny-serving-{tag}",
            kind="serving",
            status="succeeded",
            polyaxon_uuid=uuid.uuid4().hex,
            thread_ts=version_run.thread_ts,
            **common,
        )
        registration = repos.create_registration(s, model=model, version="1", run_id=train.id, artifacts=[])
        check = repos.create_serving_check(
            s, registration_id=registration.id, model=model, version="1", spec_digest="sha256:s",
            prompt_set_digest="sha256:p", run_id=serving.id, stage="staging", requester=ALICE, channel=CHANNEL,
        )  # fmt: skip
        s.commit()
        check_id = check.id or 0
    report = {"engine": "transformers", "dtype": "float32", "device": "cpu", "load_time_s": 1.5}
    verdict = [CriterionResult(name="serving budgets met", passed=True, evidence="p95 40 ms <= 500 ms")]
    with services.sessions() as s:
        repos.finish_serving_check(
            s, check_id=check_id, status="passed", report=report, verdict=[r.model_dump() for r in verdict]
        )
        passed = repos.get_serving_check(s, check_id=check_id)
    assert passed is not None
    services.release.checks.tell(passed, serving, report, verdict)
    with services.sessions() as s:
        posted = repos.find_posted_message(s, run_id=serving.id or 0, purpose="serving_report")
    assert posted is not None
    return Checked(version_run, posted.ts, model, check_id)


def promotion_requested(bot: TripwireBot, checked: Checked) -> ApprovalRequest:
    """The promotion request that follows a passed check in the version's thread, as `PromotionRequests.post`
    records it (posting it for real needs Polyaxon's model registry)."""
    services = bot.runtime.services
    assert services.runs is not None
    run = checked.version_run
    ts = services.runs.thread.post_thread(
        run, f"Approval request: promote {checked.model}:1 to staging", purpose="approval_request", broadcast=True
    )
    with services.sessions() as s:
        request = repos.create_approval_request(
            s, run_id=run.id, action="promote", model=checked.model, version="1", stage="staging", requester=ALICE,
            channel=CHANNEL, message_ts=ts, thread_ts=run.thread_ts, candidate_digest="sha256:" + "d" * 64,
            criteria=[], criteria_version="criteria.yaml", status="open",
            expires_at=datetime.now(UTC) + timedelta(days=1),
            candidate={"registration_id": 1, "from_stage": "testing", "serving_check_id": checked.check_id},
            quorum=1,
        )  # fmt: skip
        s.commit()
        return request


def thread_posts(bot: TripwireBot, run: Run) -> list[str]:
    return [str(m.get("text")) for m in bot.standin.replies(CHANNEL, run.thread_ts or "")]


def audits(bot: TripwireBot) -> int:
    with bot.runtime.services.sessions() as s:
        return len(s.exec(select(AuditEntry)).all())


def react(bot: TripwireBot, user: str, ts: str, reaction: str = EMOJI) -> None:
    """A signed reaction_added on `ts`; returns once the bot has judged it (its audit entry is written)."""
    before = audits(bot)
    sent = bot.sender.reaction("reaction_added", user=user, channel=CHANNEL, ts=ts, reaction=reaction)
    assert sent.status == 200, sent.body
    wait_for(lambda: audits(bot) > before, timeout=30)
    time.sleep(0.3)  # a post after the audit would come by now


def test_a_check_on_the_report_is_answered_once_in_the_thread_with_where_approvals_count(bot: TripwireBot) -> None:
    checked = serving_check_reported(bot)
    request = promotion_requested(bot, checked)
    run = checked.version_run
    before_posts = thread_posts(bot, run)

    react(bot, BOB, checked.report_ts)
    new = thread_posts(bot, run)[len(before_posts) :]
    assert len(new) == 1, new
    answer = new[0]
    assert answer.startswith(f":information_source: <@{BOB}>"), answer
    assert "a serving check is not approved by reaction" in answer, answer
    assert f"the request to promote `{checked.model}:1` → staging" in answer, answer
    assert bot.standin.ephemerals(CHANNEL, BOB) == [], "the answer is in the thread, not only to him"

    # Again (Slack sends a new event after a removal and a re-add), and with a skin tone: not posted again.
    react(bot, BOB, checked.report_ts)
    react(bot, BOB, checked.report_ts, reaction=f"{EMOJI}::skin-tone-3")
    assert thread_posts(bot, run)[len(before_posts) :] == [answer]
    # Another approver is told once too, by name.
    react(bot, CAROL, checked.report_ts)
    newer = thread_posts(bot, run)[len(before_posts) + 1 :]
    assert len(newer) == 1 and newer[0].startswith(f":information_source: <@{CAROL}>"), newer

    with bot.runtime.services.sessions() as s:
        fresh = s.get(ApprovalRequest, request.id)
        approvals = s.exec(select(Approval)).all()
    assert fresh is not None and fresh.status == "open"
    assert approvals == [], "nothing counts on the report"
    assert bot.polyaxon.hits == []


def test_before_a_request_is_open_the_reactor_alone_hears_how_a_promotion_is_approved(bot: TripwireBot) -> None:
    """A failed check (or one whose request is not posted yet) has no request to point at: the kinds table's
    answer, to the person who reacted only, and nothing in the thread."""
    checked = serving_check_reported(bot)
    before_posts = thread_posts(bot, checked.version_run)
    before = len(bot.standin.ephemerals(CHANNEL, BOB))
    react(bot, BOB, checked.report_ts)
    told = bot.standin.ephemerals(CHANNEL, BOB)[before:]
    assert len(told) == 1, told
    assert "approves nothing here" in told[0]["text"], told
    assert f"/finetune promote {checked.model}:1 stage=staging" in told[0]["text"], told
    assert thread_posts(bot, checked.version_run) == before_posts
