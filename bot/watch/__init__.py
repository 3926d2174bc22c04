"""The watcher: one Polyaxon list call per tick, card edits and thread posts for what changed, stuck runs flagged."""

from bot.watch.watcher import MAX_REFRESHES_PER_TICK, TickStats, Watcher

__all__ = ["MAX_REFRESHES_PER_TICK", "TickStats", "Watcher"]
