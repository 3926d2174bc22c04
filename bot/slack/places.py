"""Where the bot can post: decided before a command that posts records anything.

A slash command comes from any conversation, but the bot can post only where Slack lets it: not in a direct
message between people (or with the bot, where a card has no channel to live in), not in a private channel it
was not invited to (`conversations.info` answers `channel_not_found`), not in a channel it is not a member of
(`chat.postMessage` answers `not_in_channel`), not in an archived one. The answer per channel is cached briefly,
so a busy channel costs one `conversations.info` a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

CACHE_S = 60.0
# Slack's `channel_name` for a slash command typed in a direct message, and a group DM's name prefix.
DIRECT_MESSAGE = "directmessage"
GROUP_DM_PREFIX = "mpdm-"
GONE = frozenset({"channel_not_found", "not_in_channel", "is_archived", "method_not_supported_for_channel_type"})


class PostablePlaces:
    """Answers "can the bot post its cards here?" for a slash command's channel, from Slack, cached briefly."""

    def __init__(self, *, ttl_s: float = CACHE_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._known: dict[str, tuple[float, str | None]] = {}

    def refusal(self, client: WebClient | None, *, channel_id: str, channel_name: str) -> str | None:
        """Why the bot cannot post in this conversation (None: it can), in words for the person who typed it."""
        if channel_name == DIRECT_MESSAGE or channel_id.startswith("D"):
            return "this is a direct message, where a run's card and thread have no channel to live in"
        if channel_name.startswith(GROUP_DM_PREFIX):
            return "this is a group direct message, which the bot is not part of"
        if client is None:
            return None
        now = self.monotonic()
        with self._lock:
            cached = self._known.get(channel_id)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        why = self._ask(client, channel_id)
        with self._lock:
            self._known[channel_id] = (now, why)
        return why

    def forget(self, channel_id: str) -> None:
        """Ask Slack again next time (the bot was invited, or removed)."""
        with self._lock:
            self._known.pop(channel_id, None)

    @staticmethod
    def _ask(client: WebClient, channel_id: str) -> str | None:
        try:
            channel = client.conversations_info(channel=channel_id)["channel"]
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in GONE:
                return f"the bot cannot see this conversation (Slack says `{error}`): it was not invited here"
            # Anything else (a missing scope, a rate limit) decides nothing: the command goes on, and a post that
            # fails later is isolated by the background passes.
            log.warning("conversations.info for %s failed (%s): not refusing on it", channel_id, error)
            return None
        if channel.get("is_archived"):
            return "this channel is archived"
        if channel.get("is_im") or channel.get("is_mpim"):
            return "this is a direct message, where a run's card and thread have no channel to live in"
        if not channel.get("is_member"):
            return "the bot is not a member of this channel"
        return None
