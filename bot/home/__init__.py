"""App Home: each person's tab — their active runs, approvals waiting for them, recent registrations, digests.

compose.py  the tab as a `home` view (pure)
service.py  `AppHome`: collect and publish, when the person opens the tab (never on a watcher tick); the person's
            default for how they hear of their runs (`set_notify`)
"""

from bot.home.compose import HOME_CALLBACK, NOTIFY_ACTION, HomeData, compose_home
from bot.home.service import AppHome

__all__ = ["HOME_CALLBACK", "NOTIFY_ACTION", "AppHome", "HomeData", "compose_home"]
