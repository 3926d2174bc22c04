"""Run buttons without Slack: one value format and one reader, and the fixed list of what each action stands for."""

from __future__ import annotations

import pytest

from bot.grammar import parse_command
from bot.slack.blocks import (
    COMMAND_ACTION_ID,
    ButtonAction,
    ButtonValue,
    ButtonValueError,
    command_button,
    parse_button_value,
)
from handlers.actions import BUTTON_COMMANDS, button_command
from storage.models import Run

RUN = Run(name="sft-tiny-0123456789", recipe_name="sft-tiny", recipe_hash="h", requester="U1", channel="C1",
          status="running")  # fmt: skip


def test_a_button_carries_its_action_and_run_and_reads_back() -> None:
    button = command_button("Stop", ButtonAction.STOP, RUN.name, suffix="stop", style="danger")
    assert button["action_id"] == f"{COMMAND_ACTION_ID}:stop" and button["text"]["text"] == "Stop"
    assert button["value"] == "stop:sft-tiny-0123456789"
    assert parse_button_value(button["value"]) == ButtonValue(ButtonAction.STOP, RUN.name)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("run recipe=quickstart", "not an action and a run"),
        ("stop sft-tiny-0123456789", "not an action and a run"),
        ("run:recipe=quickstart", "`run` is not something a button does"),
        ("STOP:sft-tiny-0123456789", "`STOP` is not something a button does"),
        ("stop:", "`` is not a run name"),
        ("stop:a b", "`a b` is not a run name"),
        ("stop:r\n", "is not a run name"),
        ("stop:r top=99", "is not a run name"),
        ("stop:<!here>", "`&lt;!here&gt;` is not a run name"),
        ("stop:" + "r" * 129, "is not a run name"),
        ({"action": "stop", "run": "r"}, "not an action and a run"),
        (None, "not an action and a run"),
        (7, "not an action and a run"),
    ],
    ids=["command", "command-with-run", "unknown-action", "upper-case", "no-run", "space", "newline", "extra-argument",
         "markup", "too-long", "object", "none", "number"],
)  # fmt: skip
def test_anything_the_bot_would_not_render_is_refused_with_why(value: object, says: str) -> None:
    with pytest.raises(ButtonValueError) as refused:
        parse_button_value(value)
    assert says in str(refused.value)


def test_every_action_stands_for_one_run_command_on_its_run() -> None:
    assert set(BUTTON_COMMANDS) == set(ButtonAction)
    for action in ButtonAction:
        text = button_command(action, RUN)
        command = parse_command(text)  # the same parser as a typed command
        assert command.name == action.value.removesuffix("-top"), text
        assert getattr(command, "run", None) == RUN.name or getattr(command, "runs", None) == [RUN.name], text
    assert button_command(ButtonAction.REGISTER, RUN) == "register sft-tiny-0123456789 model=sft-tiny"
    assert button_command(ButtonAction.COMPARE_TOP, RUN) == "compare sft-tiny-0123456789 top=3"
