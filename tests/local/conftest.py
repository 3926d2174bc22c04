"""The local Polyaxon stack's own tests use the shared session stack and gateway fixtures; the shell's tests
use the real bot over HTTP on the Slack stand-in."""

from tests.fixtures import polyaxon as plx
from tests.fixtures.slack import bot_server, sender, slack_catalog, slack_standin

polyaxon_stack = plx.polyaxon_stack
gateway = plx.gateway

__all__ = ["bot_server", "gateway", "polyaxon_stack", "sender", "slack_catalog", "slack_standin"]
