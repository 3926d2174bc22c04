"""Button clicks: a run button carries an action and a run name (bot.slack.blocks), never command text.

Slack offers no slash commands inside threads, so a card offers buttons for thread actions instead, and App Home
offers Status and Stop. A click's value is read by the one parser of button values, its action mapped to the
command it stands for from the fixed list below, its run resolved by the one RUN resolver, and that command is
carried out through the same parser and rules as a typed one, in the run's own channel (never the channel the
payload names, nor the Home tab): whoever clicks may do only what the command allows them.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import Ack, App

from bot.deliveries import action_key
from bot.explain import render_command_error
from bot.grammar import CommandError
from bot.runs.lookup import find_run
from bot.services import Services
from bot.slack.blocks import (
    COMMAND_ACTION_ID,
    ButtonAction,
    ButtonValueError,
    is_user_id,
    parse_button_value,
    section,
)
from bot.slack.client import post_to_response_url
from bot.slack.views import show_in_modal
from bot.sweeps.card import COMPARE_TOP
from handlers.commands import COMMAND, NOT_A_USER, compose_reply, ephemeral, reply_blocks
from storage.models import Run
from storage.repos import add_audit

logger = logging.getLogger("finetune_bot.actions")

# Action ids must be unique within a message, so buttons use `finetune_command` or `finetune_command:<suffix>`.
ACTION_ID_PATTERN = re.compile(rf"^{re.escape(COMMAND_ACTION_ID)}(:.*)?$")

# The command each button action stands for ({run}: the run's name; {recipe}: its recipe, the model a
# registration asks for). Nothing else can come of a click.
BUTTON_COMMANDS: dict[ButtonAction, str] = {
    ButtonAction.STATUS: "status {run}",
    ButtonAction.LOGS: "logs {run}",
    ButtonAction.COMPARE: "compare {run}",
    ButtonAction.COMPARE_TOP: f"compare {{run}} top={COMPARE_TOP}",
    ButtonAction.STOP: "stop {run}",
    ButtonAction.OUTPUTS: "outputs {run}",
    ButtonAction.REGISTER: "register {run} model={recipe}",
    ButtonAction.RESUME: "resume {run}",
}


def register(app: App, services: Services) -> None:
    """Register the run-button listener."""

    @app.action(ACTION_ID_PATTERN)
    def handle_command_button(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        services.work.submit(body, lambda: handle_button_delivery(services, body))


def button_command(action: ButtonAction, run: Run) -> str:
    """The command text a button action stands for, on this run."""
    return BUTTON_COMMANDS[action].format(run=run.name, recipe=run.recipe_name)


def resolve_button(services: Services, value: object) -> tuple[str, Run]:
    """The command a button's value stands for and its run; ButtonValueError or RunError (nothing was changed)."""
    parsed = parse_button_value(value)
    run = find_run(services.sessions, parsed.run)
    return button_command(parsed.action, run), run


def handle_button_delivery(services: Services, body: dict[str, Any]) -> None:
    """After the ack (the front door admitted it once): carry out the button's command, answer where it was clicked."""
    action = (body.get("actions") or [{}])[0]
    user_id = str((body.get("user") or {}).get("id"))
    if not is_user_id(user_id):
        # Slack always sends a U…/W… id: anything else is forged, and is never logged, recorded or acted on.
        logger.warning("button refused: its user id is not a Slack user id")
        if body.get("response_url"):
            post_to_response_url(str(body["response_url"]), ephemeral(reply_blocks(NOT_A_USER)), services.metrics)
        return
    logger.info("button action_id=%s user=%s", action.get("action_id"), user_id)
    in_view = (body.get("container") or {}).get("type") == "view"
    try:
        command, run = resolve_button(services, action.get("value"))
    except (ButtonValueError, CommandError) as refused:
        refuse(services, body, user_id, refused, in_view=in_view)
        return
    if in_view:
        answer_in_modal(services, body, command, user_id, run.channel)
        return
    reply = compose_reply(services, command, user_id=user_id, channel_id=run.channel, delivery_key=action_key(body))
    response_url = body.get("response_url")
    if response_url:
        post_to_response_url(str(response_url), reply, services.metrics)


def refuse(services: Services, body: dict[str, Any], user_id: str, refused: Exception, *, in_view: bool) -> None:
    """A button the bot did not render, or for a run that does not exist: say which, record the refusal, do nothing."""
    if isinstance(refused, ButtonValueError):
        blocks = [section(f":no_entry: This is not a button the bot made: {refused}. Nothing was done.")]
        detail = "button: not the bot's"
    else:
        assert isinstance(refused, CommandError)
        blocks = render_command_error(refused)
        detail = "button: no such run"
    logger.warning("button refused user=%s: %s", user_id, detail)
    with services.sessions() as session:
        # The payload's channel is not recorded: nothing in a refused click is trusted.
        add_audit(session, user=user_id, command=f"{COMMAND} (button)", outcome="refused", detail=detail)
    if in_view:
        assert services.slack is not None, "build_app sets the client before any listener runs"
        show_in_modal(services.slack, str(body.get("trigger_id") or ""), COMMAND, lambda: blocks)
        return
    response_url = body.get("response_url")
    if response_url:
        post_to_response_url(str(response_url), ephemeral(blocks), services.metrics)


def answer_in_modal(services: Services, body: dict[str, Any], command: str, user_id: str, channel: str) -> None:
    """A button in a view (App Home) has no response_url: its answer opens in a modal, then the tab is refreshed."""

    def work() -> list[dict[str, Any]]:
        reply = compose_reply(services, command, user_id=user_id, channel_id=channel, delivery_key=action_key(body))
        return list(reply["blocks"])

    assert services.slack is not None, "build_app sets the client before any listener runs"
    title = f"{COMMAND} {command.split()[0]}"
    if not show_in_modal(services.slack, str(body.get("trigger_id") or ""), title, work):
        logger.warning("home button %r carried out; its answer was not shown (the trigger expired)", command)
    if services.home is not None:
        services.home.publish(user_id, force=True)
