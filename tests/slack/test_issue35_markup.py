"""Issue 35, item 3, through the front door: values are escaped wherever the bot writes them, and a user id that is
not in Slack's shape is refused (a command, with a specific answer) or ignored (a reaction: nobody to answer).

The issue's payloads: a reaction named `<!channel>` by U0ERIN on a registration request (the bot answered
":information_source: only :white_check_mark: approves; <@U0ERIN>'s :<!channel>: is not counted"), and a command
whose user_id is `U0DAVE><!here` (the bot wrote "asked by <@U0DAVE><!here>" in the run's thread).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import select

from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.slack.blocks import is_user_id
from handlers.commands import NOT_A_USER
from storage import repos
from storage.models import Approval, ApprovalRequest, AuditEntry, Delivery, Run
from tests.fixtures.slack import block_texts, wait_for
from tests.fixtures.tripwire import TripwireBot, tripwire_bot

SIGNING_SECRET = "markup-signing-secret-" + "0" * 12
CHANNEL = DEFAULT_CHANNEL
ALICE = "U0ALICE01"  # requester of the run and of its registration request
BOB = "U0BOB0001"  # the approver
ERIN = "U0ERIN"  # a member who reacts with something else
FORGED_USER = "U0DAVE><!here"
MENTION = re.compile(r"<@([^>]*)>")


@pytest.fixture(scope="module")
def markup_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TripwireBot]:
    """The bot as `serve` builds it (scheduler not started), on the stand-in; Polyaxon is a tripwire (unused)."""
    with tripwire_bot(tmp_path_factory.mktemp("markup"), SIGNING_SECRET, approvers=[BOB]) as bot:
        yield bot


def registration_request(bot: TripwireBot) -> tuple[Run, str]:
    """A succeeded run with its card, and an open registration request posted in its thread: (run, request ts)."""
    services = bot.runtime.services
    assert services.runs is not None
    tag = uuid.uuid4().hex[:8]
    with services.sessions() as s:
        run = repos.create_run(
            s, name=f"sft-tiny-{tag}", recipe_name="sft-tiny", recipe_hash="sha256:r", component="trl-sft", params={},
            overrides={}, presets=["cpu-small"], pins={}, requester=ALICE, channel=CHANNEL, status="succeeded",
            polyaxon_uuid=uuid.uuid4().hex, finished_at=datetime.now(UTC),
        )  # fmt: skip
    services.runs.thread.post_card(run)
    with services.sessions() as s:
        run = repos.get_run(s, run_id=run.id or 0) or run
    ts = services.runs.thread.post_thread(run, "Approval request: register tiny-chat", purpose="approval_request")
    with services.sessions() as s:
        repos.create_approval_request(
            s, run_id=run.id, action="register", model="tiny-chat", requester=ALICE, channel=CHANNEL, message_ts=ts,
            thread_ts=run.thread_ts, candidate_digest="sha256:c", status="open", quorum=1,
            expires_at=datetime.now(UTC) + timedelta(hours=1),
        )  # fmt: skip
    return run, ts


def written_texts(standin: SlackStandIn, since: int) -> list[str]:
    """Every text and block text the bot sent to Slack after the first `since` Web API calls, and every reply."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "text" and isinstance(item, str):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(standin.calls()[since:])
    for post in standin.response_url_posts():
        walk(post.get("payload"))
    return found


def assert_no_markup_from_values(texts: list[str]) -> None:
    """No broadcast, and `<@…>` only around user ids in Slack's shape."""
    for text in texts:
        assert "<!" not in text, text
        for found in MENTION.findall(text):
            assert is_user_id(found), text


def handled(bot: TripwireBot, kind: str, before: int) -> None:
    """Wait until every delivery of `kind` after the first `before` is done (its work finished)."""

    def done() -> bool:
        with bot.runtime.services.sessions() as s:
            rows = list(s.exec(select(Delivery).where(Delivery.kind == kind).order_by(Delivery.id)).all())  # type: ignore[arg-type]
        return len(rows) > before and all(r.state == "done" for r in rows[before:])

    wait_for(done, timeout=30)


def count(bot: TripwireBot, table: Any, **where: Any) -> int:
    with bot.runtime.services.sessions() as s:
        stmt = select(table)
        for field, value in where.items():
            stmt = stmt.where(getattr(table, field) == value)
        return len(s.exec(stmt).all())


def deliveries(bot: TripwireBot, kind: str) -> int:
    return count(bot, Delivery, kind=kind)


POSTS = ("chat.postMessage", "chat.update", "chat.postEphemeral", "reactions.add", "files.completeUploadExternal")


def posts(bot: TripwireBot) -> int:
    """How many times the bot wrote to Slack (messages, edits, ephemerals, reactions, files)."""
    return sum(len(bot.standin.calls(method)) for method in POSTS)


def test_a_reaction_named_channel_on_a_registration_request_is_told_escaped(markup_bot: TripwireBot) -> None:
    bot = markup_bot
    run, ts = registration_request(bot)
    calls = len(bot.standin.calls())
    sent = bot.sender.reaction("reaction_added", user=ERIN, channel=CHANNEL, ts=ts, reaction="<!channel>")
    assert sent.status == 200, sent.body

    notice = wait_for(
        lambda: [m for m in bot.standin.replies(CHANNEL, run.thread_ts or "") if "is not counted" in str(m.get("text"))]
    )
    assert [m["text"] for m in notice] == [
        ":information_source: only :white_check_mark: approves; <@U0ERIN>'s :&lt;!channel&gt;: is not counted"
    ]
    assert_no_markup_from_values(written_texts(bot.standin, calls))
    assert count(bot, Approval, user=ERIN) == 0


def test_a_reaction_whose_user_is_not_a_slack_id_is_ignored(markup_bot: TripwireBot) -> None:
    bot = markup_bot
    _, ts = registration_request(bot)
    calls, events, audits = len(bot.standin.calls()), deliveries(bot, "event"), count(bot, AuditEntry)
    for reaction in ("white_check_mark", "<!channel>"):
        sent = bot.sender.reaction("reaction_added", user="U0ERIN><!channel", channel=CHANNEL, ts=ts, reaction=reaction)
        assert sent.status == 200, sent.body
    handled(bot, "event", events)

    # Nothing counted, recorded, posted or answered: the id is never interpolated anywhere.
    assert bot.standin.calls()[calls:] == []
    assert count(bot, AuditEntry) == audits and count(bot, Approval) == 0
    with bot.runtime.services.sessions() as s:
        request = s.exec(select(ApprovalRequest).where(ApprovalRequest.message_ts == ts)).one()
    assert request.status == "open"


@pytest.mark.parametrize(
    "text", ["logs {run}", "stop {run}", "status", "run recipe=sft-tiny"], ids=["logs", "stop", "status", "run"]
)
def test_a_command_whose_user_id_is_not_a_slack_id_is_refused(markup_bot: TripwireBot, text: str) -> None:
    bot = markup_bot
    run, _ = registration_request(bot)
    calls, audits = len(bot.standin.calls()), count(bot, AuditEntry)
    replies = len(bot.standin.response_url_posts(CHANNEL))
    sent = bot.sender.slash_command(text.format(run=run.name), user_id=FORGED_USER, channel_id=CHANNEL)
    assert sent.status == 200, sent.body

    [reply] = wait_for(lambda: bot.standin.response_url_posts(CHANNEL)[replies:])
    payload = reply["payload"]
    assert payload["response_type"] == "ephemeral"
    assert [b["text"]["text"] for b in payload["blocks"]] == [NOT_A_USER]
    assert "U0DAVE" not in str(payload)
    # Nothing posted in the thread, asked of Slack, recorded or changed.
    assert bot.standin.calls()[calls:] == []
    assert count(bot, AuditEntry) == audits
    with bot.runtime.services.sessions() as s:
        assert (repos.get_run(s, run_id=run.id or 0) or run).status == "succeeded"
        assert s.exec(select(Run).where(Run.requester == FORGED_USER)).all() == []


@pytest.mark.parametrize(
    "text",
    ["logs {run} lines=<!here>", "status <!here>", "compare {run} <@U0EVIL|boss>", "register {run} model=a&b"],
    ids=["here-in-a-value", "here-as-the-run", "forged-mention", "ampersand"],
)
def test_markup_in_a_commands_arguments_is_answered_as_text(markup_bot: TripwireBot, text: str) -> None:
    bot = markup_bot
    run, _ = registration_request(bot)
    calls, written, replies = len(bot.standin.calls()), posts(bot), len(bot.standin.response_url_posts(CHANNEL))
    sent = bot.sender.slash_command(text.format(run=run.name), user_id=ALICE, channel_id=CHANNEL)
    assert sent.status == 200, sent.body

    [reply] = wait_for(lambda: bot.standin.response_url_posts(CHANNEL)[replies:])
    answer = "\n".join(block_texts(reply["payload"]["blocks"]))
    assert answer.startswith(":x: shell syntax is not accepted"), answer  # the specific answer, and nothing ran
    assert_no_markup_from_values(written_texts(bot.standin, calls))
    assert posts(bot) == written
