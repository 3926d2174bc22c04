"""The first commands through the real front door: help, recipes, presets, run --dry-run, errors, buttons."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlmodel import select

from bot.explain import THREAD_NOTE, render_help, render_plan, render_presets, render_recipes
from bot.grammar import RunCommand, parse_command
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.sender import block_actions_payload
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.slack.blocks import COMMAND_ACTION_ID, ButtonAction, command_button
from storage import repos
from storage.models import AuditEntry
from tests.fixtures.slack import BotServer, wait_for

C = DEFAULT_CHANNEL


def _reply(sender: SlackSender, standin: SlackStandIn, text: str) -> dict[str, Any]:
    before = len(standin.response_url_posts())
    assert sender.slash_command(text).status == 200
    posts = wait_for(lambda: (p := standin.response_url_posts()) and len(p) > before and p)
    payload: dict[str, Any] = posts[-1]["payload"]
    assert payload["response_type"] == "ephemeral" and payload["replace_original"] is False and payload["text"]
    return payload


def _text(payload: dict[str, Any]) -> str:
    return str(payload["blocks"])


@pytest.mark.parametrize("text", ["", "help", "help run", "--help"], ids=["empty", "help", "help-run", "dash-help"])
def test_help(sender: SlackSender, slack_standin: SlackStandIn, text: str) -> None:
    payload = _reply(sender, slack_standin, text)
    topic = text.split()[1] if text.startswith("help ") else None
    assert payload["blocks"] == render_help(topic)
    assert THREAD_NOTE in _text(payload)  # slash commands do not work in threads: help says so


def test_recipes_and_presets(sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer) -> None:
    catalog = bot_server.services.catalog
    assert catalog is not None
    assert _reply(sender, slack_standin, "recipes")["blocks"] == render_recipes(catalog)
    assert _reply(sender, slack_standin, "presets")["blocks"] == render_presets(catalog)


def test_unknown_subcommand_names_the_closest(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    text = _text(_reply(sender, slack_standin, "recipies"))
    assert "recipies" in text and "`recipes`" in text
    with bot_server.services.sessions() as session:
        [entry] = session.exec(select(AuditEntry)).all()
    assert (entry.outcome, entry.user, entry.channel) == ("refused", "U0ALICE01", C)


def test_dry_run_replies_with_the_plan(sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer) -> None:
    catalog = bot_server.services.catalog
    assert catalog is not None
    command = parse_command("run recipe=quickstart --dry-run")
    assert isinstance(command, RunCommand)
    payload = _reply(sender, slack_standin, "run recipe=quickstart --dry-run")
    assert payload["blocks"] == render_plan(catalog.plan(command))
    assert slack_standin.messages(C) == []  # a dry run posts nothing in the channel


def test_plan_errors_are_ephemeral_replies(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    text = _text(_reply(sender, slack_standin, "run recipe=quickstrat --dry-run"))
    assert ":x:" in text and "quickstart" in text
    assert (
        bot_server.services.metrics.registry.get_sample_value("finetune_bot_listener_errors_total", {"kind": "command"})
        is None
    )


@pytest.mark.parametrize(
    "text",
    [
        "run recipe=quickstart",
        "status",
        "logs abc12345",
        "logs abc12345 follow",
        "stop abc12345",
        "resume abc12345",
        "compare abc12345 def67890",
        "register abc12345 model=m",
        "digest now",
        "trace m",
    ],
)
def test_a_bot_without_polyaxon_or_scheduler_says_what_is_off(
    sender: SlackSender, slack_standin: SlackStandIn, text: str
) -> None:
    # This bot is built without a gateway or a scheduler: each subcommand names the part it needs.
    reply = _text(_reply(sender, slack_standin, text))
    assert "is not available on this bot" in reply
    assert ("the scheduler" if text.startswith("digest") else "it needs Polyaxon") in reply


def test_a_button_runs_its_command_once_in_its_runs_channel(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    with bot_server.services.sessions() as s:
        repos.create_run(s, name="sft-tiny-0123456789", recipe_name="sft-tiny", recipe_hash="h", requester="U0ALICE01",
                         channel=C, status="running")  # fmt: skip
    button = command_button("Logs", ButtonAction.LOGS, "sft-tiny-0123456789", suffix="logs")
    assert button["action_id"].startswith(COMMAND_ACTION_ID) and button["value"] == "logs:sft-tiny-0123456789"
    payload = block_actions_payload(
        button["action_id"],
        button["value"],
        user_id="U0BOB0001",
        channel_id="C0GENERAL",  # what the payload says: the command acts in the run's channel all the same
        thread_ts="1.000001",
        response_url=slack_standin.new_response_url(channel=C, user="U0BOB0001"),
    )
    with ThreadPoolExecutor(3) as pool:
        sent = list(pool.map(lambda _: sender.interactivity(payload), range(3)))
    assert [s.status for s in sent] == [200] * 3
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    # This bot has no Polyaxon: the button's command (logs) says so, as the typed one would.
    assert "`/finetune logs` is not available" in _text(post["payload"]) and post["user"] == "U0BOB0001"
    wait_for(lambda: len(bot_server.deliveries("action")) == 1)
    with bot_server.services.sessions() as s:
        [audit] = s.exec(select(AuditEntry).where(AuditEntry.user == "U0BOB0001")).all()
    assert (audit.command, audit.channel) == ("/finetune logs", C)
