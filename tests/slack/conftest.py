"""Fixtures of the Slack area (defined in tests/fixtures/ so other areas can reuse them)."""

from tests.fixtures.hostile import scene, trap
from tests.fixtures.slack import bot_server, repo_bot, send, sender, slack_catalog, slack_standin

__all__ = ["bot_server", "repo_bot", "scene", "send", "sender", "slack_catalog", "slack_standin", "trap"]
