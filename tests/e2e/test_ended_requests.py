"""Issue 33 E and the run references of G, through the front door on the real local Polyaxon.

Two runs held over the channel's budget (as in `test_usage.py`): a prefix of both their names is ambiguous and
stops neither; stopping one voids its approval request at once, in the one message that says it was cancelled,
and from then on neither the digest nor App Home lists it as waiting, and a late approval changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import ApprovalRequest, Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.e2e.test_usage import _catalog
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]


@pytest.fixture(scope="module")
def bot(polyaxon_stack: LocalPolyaxonStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBot]:
    folder = tmp_path_factory.mktemp("ended")
    with start_live_bot(polyaxon_stack, folder, catalog_dir=_catalog(folder), approvers=[BOB]) as live:
        assert live.runtime.services.home is not None
        live.runtime.services.home.min_interval_s = 0.0  # every opening of the tab publishes what it shows now
        yield live


@pytest.fixture(scope="module")
def held(bot: LiveBot) -> tuple[Run, Run]:
    """Two quick starts of alice's, held over a budget nothing fits in; the first typed with a needless --force."""
    assert "budget 0.001" in reply_text(bot.command("budget set 0.001 per=week", user=BOB))
    runs = []
    for text in ("run recipe=quickstart preset=gpu-local epochs=1 --force", "run recipe=quickstart preset=gpu-local"):
        reply = reply_text(bot.command(text, user=ALICE))
        assert "is held" in reply, reply
        runs.append(bot.run_named(run_name_in({"text": reply})))
    assert all(run.status == "awaiting_approval" for run in runs)
    return runs[0], runs[1]


def _request(bot: LiveBot, run: Run) -> ApprovalRequest:
    with bot.runtime.services.sessions() as s:
        [request] = repos.list_approval_requests(s, run_id=run.id, action="budget")
    return request


def _digest(bot: LiveBot) -> str:
    before = len([m for m in bot.standin.messages(CHANNEL) if "Training digest" in str(m)])
    assert "Posted the digest" in reply_text(bot.command("digest now"))
    posted = wait_for(lambda: [m for m in bot.standin.messages(CHANNEL) if "Training digest" in str(m)][before:])
    return reply_text(posted[-1])


def _waiting_section(digest: str) -> str:
    return digest.split("Waiting for a decision", 1)[1].split("\n*", 1)[0] if "Waiting for a decision" in digest else ""


def _bobs_home(bot: LiveBot, *, lists: str, not_: str | None = None) -> str:
    """Bob (the approver) opens App Home; its text once it lists `lists` and not `not_` (a timeout otherwise)."""
    assert bot.sender.home_opened(BOB).status == 200

    def shown() -> str | None:
        home = bot.standin.views.home(BOB)
        text = reply_text(home) if home else ""
        return text if lists in text and (not_ is None or not_ not in text) else None

    return wait_for(shown, timeout=15)


def test_a_needless_force_is_said_in_the_held_runs_thread(bot: LiveBot, held: tuple[Run, Run]) -> None:
    forced, plain = held
    assert any("--force is not needed" in text for text in bot.thread(forced)), bot.thread(forced)
    assert not any("--force" in text for text in bot.thread(plain))
    with bot.runtime.services.sessions() as s:
        audits = [entry.command for entry in repos.list_audit_for_run(s, run_id=forced.id or 0)]
    assert audits and not any(command.endswith("--force") for command in audits)  # nothing was forced


@pytest.mark.parametrize("verb", ["status", "stop"])
def test_a_prefix_of_several_runs_is_ambiguous_and_changes_nothing(
    bot: LiveBot, held: tuple[Run, Run], verb: str
) -> None:
    reply = reply_text(bot.command(f"{verb} quickstart", user=ALICE))
    assert "'quickstart' is ambiguous: it begins the names of 2 runs" in reply, reply
    assert f"`{held[1].name}`, `{held[0].name}`" in reply  # newest first
    assert "no run 'quickstart'" not in reply
    assert [bot.run_named(run.name).status for run in held] == ["awaiting_approval", "awaiting_approval"]


def test_stopping_a_held_run_voids_its_request_at_once_in_one_message(bot: LiveBot, held: tuple[Run, Run]) -> None:
    stopped, waiting = held
    before = _digest(bot)
    assert stopped.name in _waiting_section(before) and waiting.name in _waiting_section(before), before
    assert "Waiting for you (2)" in _bobs_home(bot, lists=stopped.name)
    thread_before = len(bot.thread(stopped))

    reply = reply_text(bot.command(f"stop {stopped.name}", user=ALICE))
    assert f"Cancelled `{stopped.name}`. Its approval request is voided" in reply, reply
    assert _request(bot, stopped).status == "voided"
    assert _request(bot, waiting).status == "open"  # the other run's request stands
    done = bot.wait_status(stopped.name, {"stopped"}, timeout=30)
    told = bot.thread(done)[thread_before:]
    assert len(told) == 1, told
    assert "Cancelled by" in told[0] and "approval request is voided" in told[0], told

    after = _digest(bot)
    assert stopped.name not in _waiting_section(after) and waiting.name in _waiting_section(after), after
    assert "Waiting for you (1)" in _bobs_home(bot, lists=waiting.name, not_=stopped.name)

    # A late approval on the voided request neither releases the run nor announces a void again: the approver is
    # told once why it approves nothing, naming the cancellation (not "the held run changed").
    request = _request(bot, stopped)
    assert request.message_ts is not None
    bot.standin.react_as_user(BOB, CHANNEL, request.message_ts, "white_check_mark")
    sent = bot.sender.reaction(
        "reaction_added", user=BOB, channel=CHANNEL, ts=request.message_ts, reaction="white_check_mark"
    )
    assert sent.status == 200
    wait_for(lambda: bot.runtime.services.work.in_flight == 0)
    assert bot.run_named(stopped.name).status == "stopped" and bot.run_named(stopped.name).polyaxon_uuid is None
    later = wait_for(lambda: bot.thread(done)[thread_before + 1 :])
    assert len(later) == 1 and later[0].startswith(":information_source: this request was voided:"), later
    assert f"its run `{stopped.name}` was stopped before it reached Polyaxon" in later[0], later
    assert "changed after it was made" not in later[0]
