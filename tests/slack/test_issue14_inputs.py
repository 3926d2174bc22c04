"""Issue 14 through the front door: signed `/finetune` commands whose replies must say what the bot really does."""

from __future__ import annotations

import pytest

from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from tests.fixtures.slack import BotServer, ephemeral_reply


def test_an_int_written_as_a_float_is_refused(send: SlackSender, slack_standin: SlackStandIn) -> None:
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny seed=1e3 --dry-run")
    assert reply.startswith(":x: seed is an int: write 1000")
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny max_steps=1.5 --dry-run")
    assert reply.startswith(":x: max_steps is an int: write a whole number")
    # Floats still take ints: quickstart's lr is a float in (0, 1].
    reply = ephemeral_reply(send, slack_standin, "run recipe=quickstart lr=1 --dry-run")
    assert reply.startswith("Dry run: quickstart") and "`lr` = 1.0  ← _command line_" in reply


def test_upper_case_names_are_read_lower_case(send: SlackSender, slack_standin: SlackStandIn) -> None:
    reply = ephemeral_reply(send, slack_standin, "RUN recipe=SFT-TINY preset=CPU-SMALL --dry-run")
    assert reply.startswith("Dry run: sft-tiny") and ":x:" not in reply
    assert "*Presets* `cpu-small`" in reply


def test_shell_syntax_is_refused_up_front(send: SlackSender, slack_standin: SlackStandIn) -> None:
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny seed=$(rm -rf /)")
    assert reply.startswith(":x: shell syntax is not accepted: values are plain words (")
    assert "unknown flag" not in reply and "-rf" not in reply
    assert slack_standin.messages(DEFAULT_CHANNEL) == []


def test_a_typo_of_an_input_name_suggests_the_documented_key(send: SlackSender, slack_standin: SlackStandIn) -> None:
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny learning_rat=1e-3 --dry-run")
    assert "did you mean lr (sets learning_rate)?" in reply
    assert "Did you mean `lr`?" in reply and "`learning_rate`" not in reply


def test_the_dry_run_shows_effective_pins_not_component_defaults(
    send: SlackSender, slack_standin: SlackStandIn
) -> None:
    reply = ephemeral_reply(send, slack_standin, "run recipe=sft-tiny --dry-run")
    [defaults] = [line for line in reply.split("\n*") if line.startswith("Component defaults*")]
    assert "lora_r=16" in defaults and "model_revision" not in defaults
    assert "• model: `.finetune/models/tiny-llama@sha256:" in reply


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("run recipe=sft-tiny resume_from=latest --dry-run", "resume_from is set only by `/finetune resume"),
        ("resume a1b2c3d4 max_steps=1e3", "max_steps is an int: write 1000, not 1e3"),
        ("run recipe=sft-tiny --forse", "did you mean --force?"),
    ],
    ids=["resume-from-pinned", "resume-max-steps-int", "force-flag-known"],
)
def test_the_new_grammar_answers_at_the_front_door(
    send: SlackSender, slack_standin: SlackStandIn, text: str, message: str
) -> None:
    assert message in ephemeral_reply(send, slack_standin, text)


@pytest.mark.parametrize("tz", ["Europe", "America", "Asia", "Etc", "x" * 300])
def test_a_time_zone_area_is_a_user_error(
    send: SlackSender, slack_standin: SlackStandIn, repo_bot: BotServer, tz: str
) -> None:
    reply = ephemeral_reply(send, slack_standin, f"digest daily 09:00 tz={tz}")
    assert reply.startswith(":x: unknown time zone") and "IANA" in reply
    errors = repo_bot.services.metrics.registry.get_sample_value(
        "finetune_bot_listener_errors_total", {"kind": "command"}
    )
    assert errors is None
