"""Fixtures of the Slack area (defined in tests/fixtures/slack.py so other areas can reuse them)."""

from tests.fixtures.slack import bot_server, sender, slack_catalog, slack_standin

__all__ = ["bot_server", "sender", "slack_catalog", "slack_standin"]
