"""Every (command, kind) pair through the front door: signed slash commands and reactions to the real Bolt app on
the Slack stand-in, with one run of each kind seeded in the database (issue 33 B).

The bot is built by `build_runtime` against a Polyaxon tripwire that knows only the bot's project: a command the
kinds table refuses must be answered with its specific way forward before anything reaches Polyaxon, posting,
creating and changing nothing. Commands that apply are seeded on runs not yet submitted, so that each answers
with its own state check (which shows it got past the kind check) without Polyaxon either.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlmodel import select

from bot.local.slack.server import DEFAULT_CHANNEL
from bot.runs.card import card_view, render_card
from bot.runs.kinds import KINDS, RunKind, Verb, applies, kind_of, rule_for
from bot.slack.blocks import parse_button_value
from storage import repos
from storage.models import ApprovalRequest, Run
from tests.fixtures.slack import wait_for
from tests.fixtures.tripwire import TripwireBot, tripwire_bot

SIGNING_SECRET = "kinds-signing-secret-" + "0" * 12
CHANNEL = DEFAULT_CHANNEL
ALICE = "U0ALICE01"  # requester of every seeded run
BOB = "U0BOB0001"  # approver
EMOJI = "white_check_mark"


@pytest.fixture(scope="module")
def kinds_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TripwireBot]:
    """One bot (built as `serve` builds it, its scheduler not started) on the stand-in and the tripwire."""
    with tripwire_bot(tmp_path_factory.mktemp("kinds"), SIGNING_SECRET, approvers=[BOB]) as bot:
        yield bot


_worlds = itertools.count(1)


def seed_world(bot: TripwireBot, *, ended: bool) -> dict[RunKind, Run]:
    """One run of every kind, with what links them (sweep record, preflight, registration, serving check), and
    their cards and a report in each one's thread. `ended`: succeeded in Polyaxon; else not submitted yet."""
    tag = f"{next(_worlds)}{uuid.uuid4().hex[:6]}"
    services = bot.runtime.services
    assert services.runs is not None
    thread = services.runs.thread
    status = "succeeded" if ended else "pending_submit"
    now = datetime.now(UTC)

    def run(s: Any, name: str, recipe: str, **fields: Any) -> Run:
        return repos.create_run(
            s,
            name=name,
            recipe_name=recipe,
            recipe_hash="sha256:r",
            component="trl-sft",
            params={"max_steps": 20},
            overrides={"max_steps": 20} if recipe == "sft-tiny" else {},
            presets=["cpu-small"],
            pins={},
            eval_contract_hash=f"sha256:{tag}",  # each world compares only within itself
            requester=ALICE,
            channel=CHANNEL,
            status=status,
            polyaxon_uuid=uuid.uuid4().hex if ended else None,
            finished_at=now if ended else None,
            **fields,
        )

    with services.sessions() as s:
        train = run(s, f"sft-tiny-{tag}", "sft-tiny")
        world = {RunKind.TRAIN: train}
        world[RunKind.ATTEMPT] = run(
            s, f"sft-tiny-{tag}-a2", "sft-tiny", attempt=2, first_attempt_id=train.id, parent_run_id=train.id
        )
        world[RunKind.RESUME] = run(s, f"sft-tiny-{tag}-r", "sft-tiny", parent_run_id=train.id)
        sweep = world[RunKind.SWEEP] = run(s, f"quickstart-sweep-{tag}", "quickstart", kind="sweep")
        repos.create_sweep(
            s,
            run_id=sweep.id,
            mode="grid",
            space=[{"key": "lr", "input": "learning_rate", "kind": "choice", "values": [0.01, 0.1]}],
            trials=2,
            concurrency=1,
            metric="accuracy",
            higher_is_better=True,
            failure_cutoff=3,
        )
        world[RunKind.TRIAL] = run(s, f"quickstart-sweep-{tag}-t1", "quickstart", kind="trial", sweep_id=sweep.id)
        preflight = world[RunKind.PREFLIGHT] = run(s, f"sft-tiny-ddp-preflight-{tag}", "sft-tiny-ddp", kind="preflight")
        repos.create_preflight(
            s, gate_key=f"k{tag}", recipe_name="sft-tiny-ddp", presets=[], pins={}, run_id=preflight.id,
            requester=ALICE, channel=CHANNEL,
        )  # fmt: skip
        serving = world[RunKind.SERVING] = run(s, f"sft-tiny-serving-{tag}", "sft-tiny", kind="serving")
        registration = repos.create_registration(s, model=f"tiny-{tag}", version="1", run_id=train.id, artifacts=[])
        repos.create_serving_check(
            s, registration_id=registration.id, model=f"tiny-{tag}", version="1", spec_digest="sha256:s",
            prompt_set_digest="sha256:p", run_id=serving.id, stage="staging", requester=ALICE, channel=CHANNEL,
        )  # fmt: skip
        world[RunKind.EVAL] = run(s, f"sft-tiny-eval-{tag}", "sft-tiny", kind="eval", parent_run_id=train.id)
    for kind in (RunKind.TRAIN, RunKind.RESUME, RunKind.SWEEP, RunKind.PREFLIGHT, RunKind.EVAL):
        thread.post_card(world[kind])
    # An attempt edits the first attempt's card; a trial posts in its sweep's thread, a check in its version's.
    shared = {RunKind.ATTEMPT: train, RunKind.TRIAL: sweep, RunKind.SERVING: train}
    with services.sessions() as s:
        for kind, home in shared.items():
            fresh = repos.get_run(s, run_id=world[kind].id or 0)
            assert fresh is not None
            repos.update_run(
                s, fresh, thread_ts=home.thread_ts, card_ts=home.card_ts if kind is RunKind.ATTEMPT else None
            )
        world = {k: repos.get_run(s, run_id=r.id or 0) or r for k, r in world.items()}
    return world


def report_of(bot: TripwireBot, run: Run) -> str:
    """A post about the run in its thread, as its report would be (the ts to react on)."""
    assert bot.runtime.services.runs is not None
    return bot.runtime.services.runs.thread.post_thread(run, f"report of {run.name}", purpose=f"{run.kind}_report")


def reply_text(payload: dict[str, Any]) -> str:
    """Every text of an ephemeral reply (fallback and blocks)."""
    parts = [str(payload.get("text") or "")]
    for block in payload.get("blocks") or []:
        for item in [block.get("text"), *(block.get("elements") or [])]:
            if isinstance(item, dict):
                parts.append(str(item.get("text") or ""))
    return "\n".join(parts)


def command(bot: TripwireBot, text: str) -> str:
    """Send `/finetune TEXT` as ALICE, signed; the ephemeral reply's text."""
    before = len(bot.standin.response_url_posts(CHANNEL))
    sent = bot.sender.slash_command(text, user_id=ALICE, channel_id=CHANNEL)
    assert sent.status == 200, sent.body
    posts = wait_for(lambda: bot.standin.response_url_posts(CHANNEL)[before:] or None, timeout=30)
    return reply_text(dict(posts[0]["payload"]))


def react(bot: TripwireBot, ts: str) -> str:
    """BOB's approval emoji on the message `ts`: the one ephemeral answer he gets (and only one)."""
    before = len(bot.standin.ephemerals(CHANNEL, BOB))
    sent = bot.sender.reaction("reaction_added", user=BOB, channel=CHANNEL, ts=ts, reaction=EMOJI)
    assert sent.status == 200, sent.body
    new = wait_for(lambda: bot.standin.ephemerals(CHANNEL, BOB)[before:] or None, timeout=30)
    time.sleep(0.3)  # a second answer would come by now
    assert len(bot.standin.ephemerals(CHANNEL, BOB)) == before + 1, bot.standin.ephemerals(CHANNEL, BOB)[before:]
    return str(new[0].get("text"))


def command_text(verb: Verb, name: str) -> str:
    return {Verb.REGISTER: f"register {name} model=tiny", Verb.LOGS: f"logs {name} lines=5"}.get(verb, f"{verb} {name}")


def refused_phrases(kind: RunKind, verb: Verb, world: dict[RunKind, Run]) -> list[str]:
    """What the answer to a refused pair must say, naming the way forward (written out, not read from the table)."""
    name, train, trial = world[kind].name, world[RunKind.TRAIN].name, world[RunKind.TRIAL].name
    version = f"tiny-{train.removeprefix('sft-tiny-')}:1"
    ddp = "/finetune run recipe=sft-tiny-ddp"
    expected: dict[tuple[RunKind, Verb], list[str]] = {
        (RunKind.SWEEP, Verb.LOGS): [f"`{name}` is a sweep: `logs` takes one of its trials", f"/finetune logs {trial}"],
        (RunKind.SWEEP, Verb.OUTPUTS): ["`outputs` takes one of its trials", f"/finetune outputs {trial}"],
        (RunKind.SWEEP, Verb.RESUME): ["`resume` takes one of its trials", f"/finetune resume {trial}"],
        (RunKind.SWEEP, Verb.REGISTER): ["is a sweep, not a model", f"/finetune register {trial} model=NAME"],
        (RunKind.SWEEP, Verb.APPROVE): ["is a sweep, not a model", f"/finetune register {trial} model=NAME"],
        (RunKind.PREFLIGHT, Verb.COMPARE): [f"`{name}` is a preflight", "nothing to compare", ddp],
        (RunKind.PREFLIGHT, Verb.OUTPUTS): ["is a preflight: its report is in its thread", ddp],
        (RunKind.PREFLIGHT, Verb.RESUME): ["resume is for training runs", f"Run the recipe it validated: `{ddp}`"],
        (RunKind.PREFLIGHT, Verb.REGISTER): [f"`{name}` is a preflight, not a model", f"Train it with `{ddp}`"],
        (RunKind.PREFLIGHT, Verb.APPROVE): ["is a preflight, not a model", f":{EMOJI}: approves nothing", ddp],
        (RunKind.SERVING, Verb.COMPARE): [f"is a serving check of `{version}`", f"/finetune compare {train}"],
        (RunKind.SERVING, Verb.OUTPUTS): ["its report is in the version's thread", f"/finetune outputs {train}"],
        (RunKind.SERVING, Verb.RESUME): ["it trains nothing", f"/finetune promote {version} stage=staging"],
        (RunKind.SERVING, Verb.REGISTER): [f"is a serving check, not a model: register the run it checked, `{train}`"],
        (RunKind.SERVING, Verb.APPROVE): ["judges its report", f"/finetune promote {version} stage=staging"],
        (RunKind.EVAL, Verb.RESUME): ["it trains nothing", f"/finetune eval {train}"],
        (RunKind.EVAL, Verb.REGISTER): [f"register the run it evaluated, `{train}`"],
        (RunKind.EVAL, Verb.APPROVE): ["not a model", f"/finetune register {train} model=NAME"],
    }
    return expected[(kind, verb)]


def applied_phrases(kind: RunKind, verb: Verb, name: str) -> list[str]:
    """What a command that applies answers about a run not submitted yet: its own check, past the kind's."""
    if kind is RunKind.SWEEP:  # the sweep's own commands, on the whole sweep
        return {
            Verb.STATUS: [f"Leaderboard · {name}", "*pending_submit*"],
            Verb.STOP: [f"Cancelled sweep `{name}` before it reached Polyaxon"],
            Verb.COMPARE: [f"sweep `{name}` has 0 trial(s) with a final evaluation"],
        }[verb]
    return {
        Verb.STATUS: [name, "pending_submit"],
        Verb.LOGS: [f"run {name} has not reached Polyaxon yet"],
        Verb.STOP: [f"Cancelled `{name}`"],
        Verb.RESUME: [f"run `{name}` is pending_submit; resume a run that has finished"],
        Verb.COMPARE: [f"to compare `{name}` with"],
        Verb.OUTPUTS: [f"`{name}` has not reached Polyaxon yet"],
        Verb.REGISTER: [f"run `{name}` is pending_submit: only a run that succeeded can be registered"],
        Verb.APPROVE: ["has no open approval request", f"/finetune register {name} model=NAME"],
    }[verb]


def counts(bot: TripwireBot) -> dict[str, int]:
    """What a refused command must leave as it was: runs, approval requests, posts, uploads, Polyaxon calls."""
    with bot.runtime.services.sessions() as s:
        runs = len(s.exec(select(Run)).all())
        requests = len(s.exec(select(ApprovalRequest)).all())
        statuses = sorted((r.name, r.status) for r in s.exec(select(Run)).all())
    return {
        "runs": runs,
        "requests": requests,
        "statuses": hash(tuple(statuses)),
        "posts": len(bot.standin.calls("chat.postMessage")),
        "updates": len(bot.standin.calls("chat.update")),
        "uploads": len(bot.standin.files()),
        "polyaxon": len(bot.polyaxon.hits),
    }


PAIRS = [(kind, verb) for kind in RunKind for verb in Verb]


@pytest.mark.parametrize(("kind", "verb"), PAIRS, ids=[f"{verb}-{kind}" for kind, verb in PAIRS])
def test_every_command_on_every_kind(kinds_bot: TripwireBot, kind: RunKind, verb: Verb) -> None:
    """A pair the table refuses gets its specific answer and changes nothing; one it allows is carried out."""
    refused = not rule_for(kind, verb).applies
    world = seed_world(kinds_bot, ended=refused)
    run = world[kind]
    assert kind_of(run) is kind
    ts = report_of(kinds_bot, run) if verb is Verb.APPROVE else ""
    before = counts(kinds_bot)
    answer = react(kinds_bot, ts) if verb is Verb.APPROVE else command(kinds_bot, command_text(verb, run.name))
    expected = refused_phrases(kind, verb, world) if refused else applied_phrases(kind, verb, run.name)
    for phrase in expected:
        assert phrase in answer, answer
    assert "Something went wrong" not in answer
    assert kinds_bot.polyaxon.hits == [], "nothing may reach Polyaxon"
    if refused:
        assert counts(kinds_bot) == before


def test_the_table_holds_every_kind_and_verb() -> None:
    """The table is complete: every kind says something for every command, button and the reaction."""
    assert set(KINDS) == set(RunKind)
    for kind in RunKind:
        assert set(KINDS[kind]) == set(Verb), kind
        for verb in Verb:
            rule = rule_for(kind, verb)
            assert rule.as_run or rule.says, (kind, verb)  # a refusal always has its answer


@pytest.mark.parametrize("kind", list(RunKind), ids=str)
@pytest.mark.parametrize("status", ["running", "succeeded", "failed", "stopped"])
def test_card_buttons_only_offer_what_applies(kind: RunKind, status: str) -> None:
    """Every button a run's card renders carries an action the table allows for the run's kind."""
    run = Run(
        name="r-1", recipe_name="sft-tiny", recipe_hash="h", requester=ALICE, channel=CHANNEL, status=status,
        kind=kind.value if kind not in (RunKind.ATTEMPT, RunKind.RESUME) else "train", checkpoint_step=10,
        attempt=2 if kind is RunKind.ATTEMPT else 1, first_attempt_id=1 if kind is RunKind.ATTEMPT else None,
        parent_run_id=1 if kind is RunKind.RESUME else None,
    )  # fmt: skip
    assert kind_of(run) is kind
    [actions] = [b for b in render_card(card_view(run, polyaxon_url=None)) if b.get("type") == "actions"]
    values = [parse_button_value(e["value"]) for e in actions["elements"]]
    assert {v.run for v in values} == {"r-1"}  # an action and the run: never command text
    offered = {Verb(v.action.value) for v in values}
    assert offered, "a card always offers its logs"
    assert all(applies(kind, verb) for verb in offered), offered
    if kind in (RunKind.PREFLIGHT, RunKind.SERVING):
        assert offered <= {Verb.LOGS, Verb.STOP}
