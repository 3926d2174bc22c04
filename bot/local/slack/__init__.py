"""Local Slack: a stateful Web API stand-in, Socket Mode endpoint and a sender that plays Slack's side."""

from bot.local.slack.sender import SentRequest, SlackSender
from bot.local.slack.server import SlackStandIn

__all__ = ["SentRequest", "SlackSender", "SlackStandIn"]
