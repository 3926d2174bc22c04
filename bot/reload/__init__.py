"""The catalog reloaded while the bot runs: polled, checked whole, swapped in at once; its revision."""

from bot.reload.revision import fingerprint, revision
from bot.reload.service import CatalogReloader, Reloaded

__all__ = ["CatalogReloader", "Reloaded", "fingerprint", "revision"]
