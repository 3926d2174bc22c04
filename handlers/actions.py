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
    reply = compose_reply(
        services,
        str(action.get("value") or ""),
        user_id=user_id,
        channel_id=channel_id,
        delivery_key=action_key(body),
    )
    response_url = body.get("response_url")
    if response_url:
        post_to_response_url(str(response_url), reply, services.metrics)
