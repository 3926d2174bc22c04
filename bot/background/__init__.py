"""Background passes survive their worst item: each item isolated, failures recorded, backed off, parked, told."""

from bot.background.items import BackgroundItems, Batch, GiveUp, Tried
from bot.background.metrics import BackgroundItemsCollector
from bot.background.policy import ItemState, RetryPolicy, item_state

__all__ = [
    "BackgroundItems",
    "BackgroundItemsCollector",
    "Batch",
    "GiveUp",
    "ItemState",
    "RetryPolicy",
    "Tried",
    "item_state",
]
