"""The watcher: Polyaxon's changes since the last tick, card edits and thread posts for them, stuck runs flagged."""

from bot.watch.changes import ChangeFeed
from bot.watch.watcher import TickStats, Watcher

__all__ = ["ChangeFeed", "TickStats", "Watcher"]
