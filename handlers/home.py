"""`app_home_opened`: the person opened the bot's Home tab; publish what is theirs (AppHome throttles)."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import App

from bot.services import Services
from bot.slack.blocks import is_user_id

logger = logging.getLogger("finetune_bot.home")

HOME_EVENTS: tuple[str, ...] = ("app_home_opened",)


def register(app: App, services: Services) -> None:
    """Register the Home tab's event listener."""
    if services.home is None:
        return

    @app.event("app_home_opened")
    def handle_app_home_opened(body: dict[str, Any]) -> None:
        services.work.submit(body, lambda: handle_home_delivery(services, body))


def handle_home_delivery(services: Services, body: dict[str, Any]) -> None:
    """Publish the person's Home tab (the Messages tab opening sends this event too: only `home` counts)."""
    event = body.get("event") or {}
    if services.home is None or event.get("tab") != "home" or not is_user_id(event.get("user")):
        return  # the Messages tab, or a user id not in Slack's shape (forged): nothing to publish
    published = services.home.publish(str(event["user"]))
    logger.info("home opened user=%s published=%s", event.get("user"), published)
