"""Channels as Slack names them, and who is in one: a channel id's shape, and membership asked of Slack.

A channel id that comes back from a view or a button is checked for Slack's shape before anything uses it, and
"is this person in that channel?" is asked of `conversations.members` (paged), never taken from a payload. A yes is
cached briefly per person and channel, so submitting a form twice, or a Home tab refreshed, costs no second
listing; a no is asked again each time, so someone who just joined is not refused for a minute.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeGuard

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

# C: a channel, G: a private channel (older workspaces), D: a direct message; upper-case letters and digits.
CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,20}")
CACHE_S = 60.0
MAX_CACHED = 10_000  # (channel, person) answers kept: the newest
PAGE = 1000  # conversations.members' largest page
MAX_PAGES = 50  # a channel of more than 50,000 members is not listed through (membership: unknown)


def is_channel_id(value: object) -> TypeGuard[str]:
    """Whether `value` is a string in the shape of a Slack conversation id."""
    return isinstance(value, str) and CHANNEL_ID.fullmatch(value) is not None


class ChannelMembers:
    """Answers "is this person in this channel?" from `conversations.members`, a yes cached briefly."""

    def __init__(self, *, ttl_s: float = CACHE_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._members: OrderedDict[tuple[str, str], float] = OrderedDict()

    def is_member(self, client: WebClient, *, channel: str, user: str) -> bool | None:
        """True or False as Slack lists the channel's members; None when Slack cannot say (an error, a huge channel)."""
        now = self.monotonic()
        key = (channel, user)
        with self._lock:
            seen = self._members.get(key)
        if seen is not None and now - seen < self.ttl_s:
            return True
        found = self._ask(client, channel, user)
        if found:
            with self._lock:
                self._members[key] = now
                self._members.move_to_end(key)
                while len(self._members) > MAX_CACHED:
                    self._members.popitem(last=False)
        return found

    @staticmethod
    def _ask(client: WebClient, channel: str, user: str) -> bool | None:
        cursor: str | None = None
        try:
            for _ in range(MAX_PAGES):
                page = client.conversations_members(channel=channel, cursor=cursor, limit=PAGE)
                if user in (page.get("members") or []):
                    return True
                cursor = (page.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    return False
        except SlackApiError as exc:
            log.info("members of %s unknown (%s)", channel, exc.response.get("error"))
            return None
        log.warning("members of %s unknown: more than %d pages", channel, MAX_PAGES)
        return None
