"""Deliveries, durable: each Slack delivery is recorded before it is acked and marked done when its work is,
so a retry is a no-op and an acked delivery a dead process never finished is carried out by another, once."""

from bot.deliveries.intake import DeliveryIntake
from bot.deliveries.keys import action_key, command_key, delivery_kind, event_key, key_of
from bot.deliveries.ledger import DeliveryLedger, strip_secrets

__all__ = [
    "DeliveryIntake",
    "DeliveryLedger",
    "action_key",
    "command_key",
    "delivery_kind",
    "event_key",
    "key_of",
    "strip_secrets",
]
