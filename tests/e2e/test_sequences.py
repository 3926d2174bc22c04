"""Issue 33: no sequence of commands, reactions and buttons a member can send reaches "Something went wrong".

Hypothesis drives random sequences over a few real runs on the local Polyaxon (a succeeded run, a stopped one,
one Polyaxon no longer has, a dry run's refusals): commands typed or sent by button with every kind of run
reference, and reactions by anyone on any message the bot posted. After each sequence every delivery must be
carried out, no listener may have failed, and no reply may be the internal-error answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import select

from bench.fuzz_front_door import INTERNAL_ERROR
from bot.local.polyaxon import LocalPolyaxonStack
from bot.slack.blocks import ButtonAction
from storage.models import Delivery
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.e2e.test_lost import delete_in_polyaxon
from tests.fixtures.slack import wait_for

pytestmark = pytest.mark.polyaxon

PEOPLE = [ALICE, BOB, "U0CAROL01"]
REACTIONS = ["white_check_mark", "x", "eyes", "+1"]
SEQUENCES = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def seeded(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveBot, list[str]]]:
    """A bot with a succeeded run, a stopped run and a run deleted in Polyaxon; the references to draw from."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("sequences")) as bot:
        names = [run_name_in(bot.command("run recipe=quickstart epochs=1")) for _ in range(3)]
        bot.command(f"stop {names[1]}")
        for name in names:
            bot.wait_status(name, {"succeeded", "stopped"}, timeout=240)
        delete_in_polyaxon(bot, polyaxon_stack, bot.run_named(names[2]))
        short = (bot.run_named(names[0]).polyaxon_uuid or "")[:8]
        yield bot, [*names, short, "quickstart", "nosuch-run", "<@U0X>"]


def commands(refs: list[str]) -> st.SearchStrategy[str]:
    """Command texts a member might type or a button might carry, over the seeded references."""
    ref = st.sampled_from(refs)
    model = st.sampled_from(["tiny", "tiny:1", "tiny:v9", "nosuch"])
    return st.one_of(
        st.builds(lambda r: f"status {r}", ref),
        st.builds(lambda r, n: f"logs {r} lines={n}", ref, st.sampled_from([1, 5, 500, 0, -1])),
        st.builds(lambda a, b: f"compare {a} {b}", ref, ref),
        st.builds(lambda r: f"outputs {r}", ref),
        st.builds(lambda r, m: f"register {r} model={m}", ref, st.sampled_from(["tiny", "Bad Name", ""])),
        st.builds(lambda r: f"resume {r}", ref),
        st.builds(lambda r: f"stop {r}", ref),
        st.builds(lambda m: f"trace {m}", model),
        st.builds(lambda m, s: f"promote {m} stage={s}", model, st.sampled_from(["staging", "prod", ""])),
        st.sampled_from(
            [
                "status",
                "usage",
                "usage by=recipe",
                "budget",
                "recipes",
                "presets",
                "help",
                "help nosuch",
                "digest now",
                "run recipe=quickstart --dry-run",
                "run recipe=nosuch",
                "run recipe=quickstart preset=",
                "run recipe=quickstart epochs=99999999999999999999",
                "sweep recipe=quickstart lr=0.1,0.2 --dry-run",
                "rollback tiny stage=staging",
                "",
            ]
        ),
    )


def button_values(refs: list[str]) -> st.SearchStrategy[str]:
    """What a button might carry: an action and any reference (as the bot renders them), or forged command text."""
    rendered = st.builds(lambda a, r: f"{a.value}:{r}", st.sampled_from(list(ButtonAction)), st.sampled_from(refs))
    return st.one_of(rendered, commands(refs))


def steps(refs: list[str]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    """A short sequence of typed commands, buttons and reactions."""
    typed = st.tuples(st.just("command"), st.tuples(commands(refs), st.sampled_from(PEOPLE)))
    button = st.tuples(st.just("button"), st.tuples(button_values(refs), st.sampled_from(PEOPLE)))
    reaction = st.tuples(
        st.just("reaction"),
        st.tuples(st.sampled_from(PEOPLE), st.sampled_from(REACTIONS), st.integers(0, 10_000), st.booleans()),
    )
    return st.lists(st.one_of(typed, button, reaction), min_size=1, max_size=6)


def _messages(bot: LiveBot) -> list[str]:
    """The ts of every message the bot posted in the channel and in its threads."""
    found: list[str] = []
    for message in bot.standin.messages(CHANNEL):
        found.append(str(message["ts"]))
        found += [str(m["ts"]) for m in bot.standin.replies(CHANNEL, str(message["ts"]))]
    return found


def _settled(bot: LiveBot) -> bool:
    with bot.runtime.services.sessions() as s:
        return not s.exec(select(Delivery).where(Delivery.state != "done")).first()


def _listener_errors(bot: LiveBot) -> float:
    registry = bot.runtime.services.metrics.registry
    return sum(registry.get_sample_value("finetune_bot_listener_errors_total", {"kind": k}) or 0.0
               for k in ("command", "event", "action", "other"))  # fmt: skip


def test_no_sequence_reaches_an_internal_error(seeded: tuple[LiveBot, list[str]]) -> None:
    bot, refs = seeded

    @SEQUENCES
    @given(steps(refs))
    def run(sequence: list[tuple[str, Any]]) -> None:
        for kind, args in sequence:
            if kind == "reaction":
                user, emoji, pick, added = args
                targets = _messages(bot)
                ts = targets[pick % len(targets)]
                bot.sender.reaction(
                    "reaction_added" if added else "reaction_removed", user=user, channel=CHANNEL, ts=ts, reaction=emoji
                )
                continue
            text, user = args
            before = len(bot.standin.response_url_posts(CHANNEL))
            if kind == "command":
                sent = bot.sender.slash_command(text, user_id=user, channel_id=CHANNEL)
            else:
                card = bot.standin.messages(CHANNEL)[-1]
                sent = bot.sender.button("finetune_command", text, user_id=user, message_ts=str(card["ts"]))
            assert sent.status == 200, (text, sent.body)
            if kind == "command" and text.strip() in {"", "run"}:
                continue  # the run form opens in a modal; no reply comes to the response_url
            wait_for(lambda b=before: len(bot.standin.response_url_posts(CHANNEL)) > b or None, timeout=60)
        wait_for(lambda: _settled(bot) or None, timeout=60)
        answers = [str(p["payload"]) for p in bot.standin.response_url_posts(CHANNEL)]
        assert not [a for a in answers if INTERNAL_ERROR in a], sequence
        assert _listener_errors(bot) == 0, sequence

    run()
