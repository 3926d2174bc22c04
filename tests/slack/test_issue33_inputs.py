"""Issue 33 G through the front door: signed `/finetune` commands at the edges of the input, answered specifically.

Each reply must say what is wrong and what to write instead, and change nothing: no message in the channel, no
run recorded.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from bot.grammar import SUBCOMMANDS
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from storage.models import Run
from tests.fixtures.slack import BotServer, ephemeral_reply

# (command, what the reply must say, what it must not say)
REFUSED = [
    (
        "run recipe=sft-tiny max_steps=99999999999999999999999 --dry-run",
        "max_steps=99999999999999999999999: 99999999999999999999999 is out of bounds: int 1..500",
        "write a whole number",
    ),
    (
        "run recipe=sft-tiny max_steps=1e30 --dry-run",
        "max_steps=1e30: 1e30 is out of bounds: int 1..500",
        "write a whole number",
    ),
    (
        "resume a1b2c3d4 max_steps=99999999999999999999999",
        "is out of bounds: a whole number of at most 18 digits",
        "write a whole number",
    ),
    ("run recipe=sft-tiny preset= --dry-run", ":x: preset= has no value: preset takes preset names", "Dry run"),
    ("run recipe=sft-tiny lr= --dry-run", ":x: lr= has no value: give lr=VALUE", "empty value"),
    ("run recipe= --dry-run", ":x: recipe= has no value: recipe takes a recipe name", "Dry run"),
    ("logs a1b2c3d4 lines=", ":x: lines= has no value: lines takes a whole number", "expected"),
    ("run recipe=sft-tíny --dry-run", ":x: no recipe 'sft-tíny'; did you mean sft-tiny", "is not a name"),
    ("run recipe=SFT-TÍNY --dry-run", "did you mean sft-tiny", "is not a name"),
    ("run recipe=sft-tiny preset=cpu-smáll --dry-run", ":x: no preset 'cpu-smáll'; did you mean cpu-small", "Dry"),
    ("help nosuch", ":x: no help topic 'nosuch' (topics: run, status, logs,", "Did you mean"),
    (
        "run recipe=sft-qwen-0p5b-lora preset=gpu-1x,gpu-8x,spot --dry-run",
        "presets gpu-1x and gpu-8x both set resources: give one resources preset; "
        "try `preset=gpu-1x,spot` or `preset=gpu-8x,spot`",
        "Did you mean `gpu-1x`, `gpu-8x`?",
    ),
]


@pytest.mark.parametrize(
    ("text", "says", "never"),
    REFUSED,
    ids=[
        "huge-int",
        "huge-exponent",
        "huge-resume",
        "empty-preset",
        "empty-training-key",
        "empty-recipe",
        "empty-lines",
        "accented-recipe",
        "accented-upper-recipe",
        "accented-preset",
        "help-unknown-topic",
        "preset-family-conflict",
    ],
)
def test_input_at_the_edges_is_refused_specifically_and_changes_nothing(
    send: SlackSender, slack_standin: SlackStandIn, repo_bot: BotServer, text: str, says: str, never: str
) -> None:
    reply = ephemeral_reply(send, slack_standin, text)
    assert says in reply, reply
    assert never not in reply, reply
    assert slack_standin.messages(DEFAULT_CHANNEL) == []
    with repo_bot.services.sessions() as s:
        assert s.exec(select(Run)).all() == []


def test_the_help_topics_listed_are_every_subcommand(send: SlackSender, slack_standin: SlackStandIn) -> None:
    reply = ephemeral_reply(send, slack_standin, "help nosuch")
    listed = reply.split("(topics: ", 1)[1].split(")", 1)[0]
    assert listed.split(", ") == list(SUBCOMMANDS)


def test_a_preset_family_conflict_suggests_whole_values_that_plan(
    send: SlackSender, slack_standin: SlackStandIn
) -> None:
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-qwen-0p5b-lora preset=gpu-1x,gpu-8x,spot --dry-run")
    assert "Did you mean `preset=gpu-1x,spot`, `preset=gpu-8x,spot`?" in reply
    # Each suggestion, sent as it is, plans.
    for preset in ("gpu-1x,spot", "gpu-8x,spot"):
        plan = ephemeral_reply(send, slack_standin, f"run recipe=sft-qwen-0p5b-lora preset={preset} --dry-run")
        assert plan.startswith("Dry run: sft-qwen-0p5b-lora") and ":x:" not in plan, plan


def test_force_where_the_memory_estimate_fits_says_it_is_not_needed(
    send: SlackSender, slack_standin: SlackStandIn
) -> None:
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny --force --dry-run")
    assert reply.startswith("Dry run: sft-tiny") and ":x:" not in reply
    assert "--force is not needed: the memory estimate fits its presets (~" in reply
    assert "is not recorded as forced" in reply
    plain = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny --dry-run")
    assert "--force is not needed" not in plain
