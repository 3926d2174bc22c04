"""Fixtures of the Slack area (defined in tests/fixtures/ so other areas can reuse them)."""

from tests.fixtures.hostile import module_bot, scene, shared_scene, trap
from tests.fixtures.slack import bot_server, repo_bot, send, sender, slack_catalog, slack_standin, socket_bot

__all__ = [
    "bot_server",
    "module_bot",
    "repo_bot",
    "scene",
    "send",
    "sender",
    "shared_scene",
    "slack_catalog",
    "slack_standin",
    "socket_bot",
    "trap",
]
