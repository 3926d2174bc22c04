"""`app_home_opened`: the person opened the bot's Home tab; publish what is theirs (AppHome throttles). The tab's
"When my runs end or need me" select: the person's default, stored, and the tab published again."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App

from bot.home import NOTIFY_ACTION
from bot.services import Services
from bot.slack.blocks import escape, is_user_id, section
from bot.slack.views import show_in_modal
from storage.repos import add_audit

logger = logging.getLogger("finetune_bot.home")

HOME_EVENTS: tuple[str, ...] = ("app_home_opened",)


def register(app: App, services: Services) -> None:
    """Register the Home tab's event listener."""
    if services.home is None:
        return

    @app.event("app_home_opened")
    def handle_app_home_opened(body: dict[str, Any]) -> None:
        services.work.submit(body, lambda: handle_home_delivery(services, body))

    @app.action(NOTIFY_ACTION)
    def handle_home_notify(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        services.work.submit(body, lambda: handle_notify_delivery(services, body))


def handle_home_delivery(services: Services, body: dict[str, Any]) -> None:
    """Publish the person's Home tab (the Messages tab opening sends this event too: only `home` counts)."""
    event = body.get("event") or {}
    if services.home is None or event.get("tab") != "home" or not is_user_id(event.get("user")):
        return  # the Messages tab, or a user id not in Slack's shape (forged): nothing to publish
    published = services.home.publish(str(event["user"]))
    logger.info("home opened user=%s published=%s", event.get("user"), published)


def handle_notify_delivery(services: Services, body: dict[str, Any]) -> None:
    """The person chose how they hear of their runs: stored when it is one of the three ways, the tab published
    again; anything else (a forged value) is refused in a modal and changes nothing."""
    user = (body.get("user") or {}).get("id")
    if services.home is None or not is_user_id(user):
        logger.warning("home notify refused: its user id is not a Slack user id")
        return
    value = ((body.get("actions") or [{}])[0].get("selected_option") or {}).get("value")
    chosen = services.home.set_notify(str(user), value)
    logger.info("home notify user=%s chosen=%s", user, chosen)
    if chosen is None:
        with services.sessions() as session:
            add_audit(session, user=str(user), command="home notify", outcome="refused", detail="not a choice offered")
        shown = escape(str(value)[:40]) if isinstance(value, str) else "that"
        blocks = [
            section(
                f":no_entry: `{shown}` is not one of the choices: a mention in the run's thread, a direct message, "
                "or both. Nothing was changed."
            )
        ]
        assert services.slack is not None, "build_app sets the client before any listener runs"
        show_in_modal(services.slack, str(body.get("trigger_id") or ""), "finetune-bot", lambda: blocks)
    services.home.publish(str(user), force=True)
