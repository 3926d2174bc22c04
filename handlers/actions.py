"""Button clicks: a button's value is a `/finetune` command string that goes back through the same parser.

Slack offers no slash commands inside threads, so a card offers buttons for thread actions instead.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import Ack, App

from bot.deliveries import action_key
from bot.services import Services
from bot.slack.blocks import COMMAND_ACTION_ID
from bot.slack.client import post_to_response_url
from bot.slack.views import show_in_modal
from handlers.commands import compose_reply

logger = logging.getLogger("finetune_bot.actions")

# Action ids must be unique within a message, so buttons use `finetune_command` or `finetune_command:<suffix>`.
ACTION_ID_PATTERN = re.compile(rf"^{re.escape(COMMAND_ACTION_ID)}(:.*)?$")


def register(app: App, services: Services) -> None:
    """Register the command-button listener."""

    @app.action(ACTION_ID_PATTERN)
    def handle_command_button(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        services.work.submit(body, lambda: handle_button_delivery(services, body))


def handle_button_delivery(services: Services, body: dict[str, Any]) -> None:
    """After the ack (the front door admitted it once): run the button's command, reply via the response_url."""
    action = (body.get("actions") or [{}])[0]
    user_id = str((body.get("user") or {}).get("id"))
    channel_id = str((body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id"))
    logger.info("button action_id=%s user=%s channel=%s", action.get("action_id"), user_id, channel_id)
    command = str(action.get("value") or "")
    if (body.get("container") or {}).get("type") == "view":
        answer_in_modal(services, body, command, user_id)
        return
    reply = compose_reply(services, command, user_id=user_id, channel_id=channel_id, delivery_key=action_key(body))
    response_url = body.get("response_url")
    if response_url:
        post_to_response_url(str(response_url), reply, services.metrics)


def answer_in_modal(services: Services, body: dict[str, Any], command: str, user_id: str) -> None:
    """A button in a view (App Home) has no response_url: its answer opens in a modal, then the tab is refreshed."""

    def work() -> list[dict[str, Any]]:
        # No channel: a command from the Home tab acts on runs by name; the audit says where it came from.
        reply = compose_reply(services, command, user_id=user_id, channel_id="app_home", delivery_key=action_key(body))
        return list(reply["blocks"])

    assert services.slack is not None, "build_app sets the client before any listener runs"
    title = f"/finetune {command.split()[0] if command.split() else ''}"
    if not show_in_modal(services.slack, str(body.get("trigger_id") or ""), title, work):
        logger.warning("home button %r carried out; its answer was not shown (the trigger expired)", command)
    if services.home is not None:
        services.home.publish(user_id, force=True)
