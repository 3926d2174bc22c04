"""What a card, a digest and the replies say is true, through the front door: signed slash commands to the real
Bolt app on the Slack stand-in, with one run of each kind seeded (as `test_run_kinds` seeds them) and a Polyaxon
tripwire (nothing here needs Polyaxon).

- A run's card and its digest line say what its kind says: an evaluation evaluates a run (it is no resume), and
  only training runs are labelled non-comparable or listed apart as such.
- `/finetune status` with no active run lists the person's recently ended runs with their figures.
- A card marks as chosen only the presets the recipe did not give; `budget off` confirms the removal.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.runs.kinds import RunKind
from storage import repos
from storage.models import Run
from tests.fixtures.slack import wait_for
from tests.fixtures.tripwire import TripwireBot, tripwire_bot
from tests.slack.test_run_kinds import ALICE, BOB, CHANNEL, SIGNING_SECRET, reply_text, seed_world


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TripwireBot]:
    with tripwire_bot(tmp_path_factory.mktemp("read"), SIGNING_SECRET, approvers=[BOB]) as started:
        yield started


@pytest.fixture(scope="module")
def world(bot: TripwireBot) -> dict[RunKind, Run]:
    """Every kind, ended, none of them fully pinned (what exploration, an eval or a serving check leaves)."""
    seeded = seed_world(bot, ended=True)
    with bot.runtime.services.sessions() as s:
        for kind, run in seeded.items():
            fresh = repos.get_run(s, run_id=run.id or 0)
            assert fresh is not None
            seeded[kind] = repos.update_run(
                s, fresh, comparable=False, last_step=20, last_metrics={"eval_loss": 1.538, "loss": 1.2}
            )
    return seeded


def command(bot: TripwireBot, text: str, *, user: str = ALICE) -> str:
    """`/finetune TEXT` as `user`, signed; the ephemeral reply's text."""
    before = len(bot.standin.response_url_posts(CHANNEL))
    sent = bot.sender.slash_command(text, user_id=user, channel_id=CHANNEL)
    assert sent.status == 200, sent.body
    posts = wait_for(lambda: bot.standin.response_url_posts(CHANNEL)[before:] or None, timeout=30)
    return reply_text(dict(posts[0]["payload"]))


def test_a_card_says_what_its_kind_is_never_what_it_shares_with_a_resume(
    bot: TripwireBot, world: dict[RunKind, Run]
) -> None:
    train = world[RunKind.TRAIN].name
    evaluation = command(bot, f"status {world[RunKind.EVAL].name}")
    assert "evaluates" in evaluation and train in evaluation.split("evaluates", 1)[1], evaluation
    assert "resumed from" not in evaluation and "non-comparable" not in evaluation, evaluation
    for kind in (RunKind.SERVING, RunKind.PREFLIGHT):
        card = command(bot, f"status {world[kind].name}")
        assert "non-comparable" not in card and "resumed from" not in card, (kind, card)
    resumed = command(bot, f"status {world[RunKind.RESUME].name}")
    assert "resumed from" in resumed and "non-comparable" in resumed, resumed  # a training run: both hold
    assert "non-comparable" in command(bot, f"status {train}")


def test_the_digest_lists_only_training_runs_as_non_comparable(bot: TripwireBot, world: dict[RunKind, Run]) -> None:
    before = len(bot.standin.messages(CHANNEL))
    command(bot, "digest now")
    digest = wait_for(
        lambda: [m for m in bot.standin.messages(CHANNEL)[before:] if "Training digest" in str(m.get("blocks"))]
    )[-1]
    sections = [str((b.get("text") or {}).get("text")) for b in digest.get("blocks") or []]
    [apart] = [text for text in sections if "*Non-comparable*" in text]
    assert world[RunKind.TRAIN].name in apart and world[RunKind.RESUME].name in apart, apart
    for kind in (RunKind.EVAL, RunKind.SERVING, RunKind.PREFLIGHT):
        assert world[kind].name not in apart, (kind, apart)
    finished = next(text for text in sections if "*Finished*" in text)
    line = next(row for row in finished.split("\n") if world[RunKind.SERVING].name in row)
    assert "serving check" in line, line
    line = next(row for row in finished.split("\n") if f"`{world[RunKind.EVAL].name}`" in row or
                f"|{world[RunKind.EVAL].name}>" in row)  # fmt: skip
    assert "evaluation" in line, line


def test_status_without_an_active_run_lists_the_recently_ended_ones(
    bot: TripwireBot, world: dict[RunKind, Run]
) -> None:
    reply = command(bot, "status")
    assert "You have no active runs" not in reply, reply
    assert "*Active*: none." in reply and "*Recently ended*" in reply, reply
    newest = max(world.values(), key=lambda r: r.id or 0)
    line = next(row for row in reply.split("\n") if f"`{newest.name}`" in row)
    assert "*succeeded*" in line and "step 20/20" in line and "eval_loss 1.538" in line, line
    assert "You have no runs yet" in command(bot, "status", user="U0NOBODY01")


def test_a_card_marks_only_presets_the_recipe_did_not_give(bot: TripwireBot, world: dict[RunKind, Run]) -> None:
    card = command(bot, f"status {world[RunKind.TRAIN].name}")  # sft-tiny on its own cpu-small
    assert "`cpu-small`" in card and "(chosen)" not in card, card
    with bot.runtime.services.sessions() as s:
        fresh = repos.get_run(s, run_id=world[RunKind.TRAIN].id or 0)
        assert fresh is not None
        repos.update_run(s, fresh, presets=["cpu-small", "spot"])
    card = command(bot, f"status {world[RunKind.TRAIN].name}")
    assert "`spot` (chosen)" in card and "`cpu-small` (chosen)" not in card, card


def test_budget_off_confirms_the_removal(bot: TripwireBot) -> None:
    assert "10 accelerator-hours" in command(bot, "budget set 10 per=week", user=BOB)
    removed = command(bot, "budget off", user=BOB)
    assert "Removed" in removed and "it was" in removed and "has no accelerator-hour budget" not in removed, removed
    assert "no budget to remove" in command(bot, "budget off", user=BOB)
