"""The local Polyaxon stack: haupt's sandbox API server plus a local process agent."""

from bot.local.polyaxon.config import LocalConnection
from bot.local.polyaxon.main import main
from bot.local.polyaxon.stack import LocalPolyaxonStack, StackError

__all__ = ["LocalConnection", "LocalPolyaxonStack", "StackError", "main"]
