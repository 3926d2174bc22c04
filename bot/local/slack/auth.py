"""Tokens and the `api.*`, `auth.*` and `apps.*` families: api.test, auth.test, apps.connections.open."""

from __future__ import annotations

from typing import Any

from bot.local.slack.state import BOT_ID, BOT_USER_ID, TEAM_DOMAIN, ApiError, ApiMethod, Workspace


def check_token(method: str, token: str | None, *, bot_token: str, app_token: str) -> None:
    """Raise the error Slack answers when `token` may not call `method` (the app token opens sockets only)."""
    if not token:
        raise ApiError("not_authed")
    if method == "apps.connections.open":
        if token != app_token:
            raise ApiError("invalid_auth")
        return
    if token == app_token:
        raise ApiError("not_allowed_token_type")
    if token != bot_token:
        raise ApiError("invalid_auth")


def api_test(_ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """api.test: the arguments back, without the token."""
    return {"args": {k: v for k, v in args.items() if k != "token"}}


def auth_test(ws: Workspace, _args: dict[str, Any]) -> dict[str, Any]:
    """auth.test: who the bot token belongs to."""
    return {
        "url": f"https://{TEAM_DOMAIN}.slack.local/",
        "team": "Stand-in",
        "user": "finetune-bot",
        "team_id": ws.team_id,
        "user_id": BOT_USER_ID,
        "bot_id": BOT_ID,
        "is_enterprise_install": False,
    }


def apps_connections_open(ws: Workspace, _args: dict[str, Any]) -> dict[str, Any]:
    """apps.connections.open: a Socket Mode URL."""
    return {"url": ws.socket_mode.new_url()}


METHODS: dict[str, ApiMethod] = {
    "api.test": api_test,
    "auth.test": auth_test,
    "apps.connections.open": apps_connections_open,
}
