"""One escaping function and user ids in Slack's shape (issue 35): `escape`, `mention`, `is_user_id`, and the
renderers' texts for hostile values — a `<!channel>`, a forged `<@U…>` or an `&` never reaches Slack as markup."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.digest.compose import DigestApproval, DigestData, DigestRegistration, DigestRun, compose_digest
from bot.registry.policy import Candidate, CriterionResult, RequestView, judge_reaction
from bot.registry.render import render_request
from bot.release.render import render_promotion_request, stage_change_line
from bot.runs.card import CardView, card_text, render_card
from bot.runs.kinds import KINDS, KindFacts, refusal
from bot.slack.blocks import escape, is_user_id, mention
from bot.usage.accounting import UsageRow
from bot.usage.render import render_usage, top_spenders

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
# What a person (or a forged payload, or Polyaxon's error text) can put where the bot writes a value.
HOSTILE = "x<!channel>&<@U0EVIL|boss><!subteam^S1>"
VALID_MENTION = re.compile(r"<@([^>]*)>")


def assert_no_markup_from_values(text: str) -> None:
    """No broadcast, and `<@…>` only around a user id in Slack's shape (what `mention` wrote)."""
    assert "<!" not in text, text
    for found in VALID_MENTION.findall(text):
        assert is_user_id(found), text
    assert "<@U0EVIL|" not in text, text


def texts(blocks: list[dict[str, Any]]) -> str:
    """Every mrkdwn text of a message's blocks."""
    out = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict) and text.get("type") == "mrkdwn":
            out.append(str(text.get("text")))
        out += [str(e.get("text")) for e in block.get("elements") or [] if e.get("type") == "mrkdwn"]
    return "\n".join(out)


# --- the functions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("a & b", "a &amp; b"),
        ("&lt;", "&amp;lt;"),  # an entity typed as text stays text
        ("<@U0EVIL|boss>", "&lt;@U0EVIL|boss&gt;"),
        ("sft-tiny-1", "sft-tiny-1"),
    ],
    ids=["broadcast", "ampersand", "entity", "forged-mention", "plain"],
)
def test_escape_turns_slacks_three_control_characters_into_entities(value: str, shown: str) -> None:
    assert escape(value) == shown


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("U0ERIN", True),
        ("W0123ABCD", True),
        ("U0ALICE01", True),
        ("U0DAVE><!here", False),
        ("u0erin", False),  # Slack's ids are capitals and digits
        ("S0GROUP1", False),  # a user group is not a user
        ("C0GENERAL", False),
        ("U1", False),  # too short to be an id
        ("U0ERIN\n", False),
        ("", False),
        (None, False),
        (42, False),
    ],
    ids=["member", "grid-member", "long", "forged", "lower-case", "group", "channel", "short", "newline", "empty",
         "none", "int"],
)  # fmt: skip
def test_is_user_id_accepts_only_slacks_user_id_shape(value: object, valid: bool) -> None:
    assert is_user_id(value) is valid


def test_mention_writes_markup_only_for_a_user_id() -> None:
    assert mention("U0ERIN") == "<@U0ERIN>"
    assert mention("U0DAVE><!here") == "U0DAVE&gt;&lt;!here"
    assert mention("<!channel>") == "&lt;!channel&gt;"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escaped_text_holds_no_markup_and_reads_back_as_written(value: str) -> None:
    shown = escape(value)
    assert "<" not in shown and ">" not in shown
    assert shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == value


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_mention_of_anything_is_a_mention_of_an_id_or_plain_text(value: str) -> None:
    shown = mention(value)
    assert shown == f"<@{value}>" if is_user_id(value) else "<" not in shown


# --- the renderers, for hostile values --------------------------------------------------------------------------

hostile = st.builds(lambda a, b: f"{a}{HOSTILE}{b}", st.text(max_size=8), st.text(max_size=8))


@settings(max_examples=40, deadline=None)
@given(value=hostile, user=st.sampled_from(["U0ERIN", "U0DAVE><!here", "<!channel>"]))
def test_every_reaction_verdict_escapes_the_reaction_and_the_reactor(value: str, user: str) -> None:
    view = RequestView(
        status="open",
        requester="U0ALICE01",
        run_requester="U0ALICE01",
        expires_at=NOW + timedelta(hours=1),
        candidate_digest="sha256:a",
        reissue=f"`{escape('/finetune register ' + value)}`",
    )
    voided = view.model_copy(update={"status": "voided"})
    cases = [
        {"reaction": value, "request": view, "on_request_message": True},  # wrong emoji
        {"reaction": "white_check_mark", "request": None, "on_request_message": False},  # wrong message
        {"reaction": "white_check_mark", "request": voided, "on_request_message": True},  # voided: re-issue …
        {"reaction": "white_check_mark", "request": view, "on_request_message": True},  # not an approver
    ]
    for case in cases:
        verdict = judge_reaction(
            added=True, user=user, approval_reaction="white_check_mark", approvers=set(), already_approved=set(),
            now=NOW, **case,
        )  # fmt: skip
        assert verdict.reason is not None
        assert_no_markup_from_values(verdict.reason)


def test_the_issues_reaction_is_told_with_its_name_escaped() -> None:
    verdict = judge_reaction(
        added=True, request=None, on_request_message=True, user="U0ERIN", reaction="<!channel>",
        approval_reaction="white_check_mark", approvers=set(), already_approved=set(), now=NOW,
    )  # fmt: skip
    assert verdict.reason == "only :white_check_mark: approves; <@U0ERIN>'s :&lt;!channel&gt;: is not counted"


@settings(max_examples=30, deadline=None)
@given(value=hostile)
def test_the_kinds_tables_answers_escape_every_fact_and_the_reaction(value: str) -> None:
    facts = KindFacts(name=value, recipe=value, again=value, sweep=value, example=value, checked=value,
                      version=value, stage=value)  # fmt: skip
    for kind, verbs in KINDS.items():
        for verb in verbs:
            answer = refusal(kind, verb, facts, reaction=value)
            if answer is not None:
                assert_no_markup_from_values(answer)


@settings(max_examples=30, deadline=None)
@given(value=hostile)
def test_the_run_card_escapes_what_the_run_and_polyaxon_say(value: str) -> None:
    view = CardView(
        name=value, recipe=value, requester=value, status=value, uuid=value, presets=[value],
        overrides={value: value}, pins={"model": value}, metrics={value: 1.0}, contract_metrics=[value],
        parent_name=value, note=value, condition=value, previous_failure=value, attempt=2, attempts=3,
        failure={"title": value, "evidence": value, "hint": value}, outputs_problems=[value],
        validation={"state": "unvalidated", "skipped_by": value, "approved_by": [value, "U0BOB0001"]},
    )  # fmt: skip
    assert_no_markup_from_values(texts(render_card(view)))
    assert_no_markup_from_values(card_text(view))
    assert_no_markup_from_values(texts(render_card(view.model_copy(update={"status": "failed"}))))


@settings(max_examples=30, deadline=None)
@given(value=hostile)
def test_approval_requests_escape_the_candidate_and_its_evidence(value: str) -> None:
    candidate = Candidate(
        run_uuid=value, run_name=value, checkpoint_path=value, checkpoint_digest=value, artifacts=[value],
        eval_results={value: 1.0}, eval_contract_hash=value, pins={value: value},
    )  # fmt: skip
    results = [CriterionResult(name=value, passed=False, evidence=value)]
    blocks = render_request(
        model=value, version=value, candidate=candidate, results=results, criteria_label=value, requester=value,
        run_requester="U0ALICE01", reaction="white_check_mark", quorum=1, expires_at=NOW,
    )  # fmt: skip
    assert_no_markup_from_values(texts(blocks))
    promotion = render_promotion_request(
        label=value, stage=value, from_stage=value, report={"latency_ms": {}}, check_id=1, results=results,
        rules_source=value, requester=value, reaction="white_check_mark", quorum=1, expires_at=NOW, digest=value,
    )  # fmt: skip
    assert_no_markup_from_values(texts(promotion))
    line = stage_change_line(at=NOW, version=value, from_stage=value, to_stage=value, kind="promote", actor=value,
                             approvers=[value, "U0BOB0001"])  # fmt: skip
    assert_no_markup_from_values(line)


@settings(max_examples=30, deadline=None)
@given(value=hostile)
def test_digests_and_usage_escape_names_people_and_reasons(value: str) -> None:
    run = DigestRun(name=value, recipe=value, status="failed", requester=value, created_at=NOW, finished_at=NOW,
                    metric_name=value, metric_value=1.0, failure=value)  # fmt: skip
    approval = DigestApproval(
        model=value, version=value, run_name=value, requester=value, created_at=NOW,
        can_still_approve=[value, "U0BOB0001"],
    )  # fmt: skip
    data = DigestData(
        channel=value,
        since=NOW - timedelta(days=1),
        runs=[run, run.model_copy(update={"status": "running"})],
        approvals=[approval],
        registrations=[DigestRegistration(model=value, version=value, run_name=value, registered_at=NOW)],
    )
    assert_no_markup_from_values(texts(compose_digest(data, NOW)))
    rows = [UsageRow(key=value, accelerator_hours=1.0, priced=True, currency=value, money=2.0, runs=1)]
    for by in ("user", "recipe"):
        usage = render_usage(rows, channel=value, period="week", by=by, start=NOW, now=NOW, budget=None)
        assert_no_markup_from_values(texts(usage))
    assert_no_markup_from_values(top_spenders(rows) or "")
