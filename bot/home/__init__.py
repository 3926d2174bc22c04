"""App Home: each person's tab — their active runs, approvals waiting for them, recent registrations, digests.

compose.py  the tab as a `home` view (pure)
service.py  `AppHome`: collect and publish, when the person opens the tab (never on a watcher tick)
"""

from bot.home.compose import HOME_CALLBACK, HomeData, compose_home
from bot.home.service import AppHome

__all__ = ["HOME_CALLBACK", "AppHome", "HomeData", "compose_home"]
