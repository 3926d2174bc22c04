"""How a run's requester hears that it ended or needs them: a mention in its thread, a direct message, or both."""

from bot.notify.render import NOTIFY_LABELS, REASONS, dm_text, is_notify, metrics_summary
from bot.notify.service import DM_KIND, RequesterNotifier, notify_default

__all__ = [
    "DM_KIND",
    "NOTIFY_LABELS",
    "REASONS",
    "RequesterNotifier",
    "dm_text",
    "is_notify",
    "metrics_summary",
    "notify_default",
]
