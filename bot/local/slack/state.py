"""The stand-in's workspace: channels, messages, users, files, rate limits, response URLs and the call log.

Every Web API family module reads and changes this state; the stand-in holds `lock` around each call.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.local.slack.socket_mode import SocketModeEndpoint
from bot.local.slack.viewstate import ViewStore

TEAM_ID = "T0LOCAL01"
TEAM_DOMAIN = "standin"
BOT_USER_ID = "U0BOT0001"
BOT_ID = "B0BOT0001"
APP_ID = "A0LOCAL01"
DEFAULT_CHANNEL = "C0TRAIN01"


class ApiError(Exception):
    """A Slack Web API error: answered as HTTP 200 with ok=false."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class Channel:
    """A channel or private group with its members and every message, top level and replies."""

    id: str
    name: str
    members: set[str]
    is_private: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)  # every message, top level and replies

    def find(self, ts: Any) -> dict[str, Any]:
        """One message by ts (the stored dict, not a copy)."""
        for msg in self.messages:
            if msg["ts"] == ts:
                return msg
        raise ApiError("message_not_found")


@dataclass
class RateLimit:
    """How many more calls are answered 429, and the `Retry-After` they carry."""

    remaining: int
    retry_after: int


@dataclass
class ResponseUrl:
    """A minted `response_url` and the channel and user it answers in."""

    id: str
    channel: str | None
    user: str | None


class Workspace:
    """The state behind the Web API; its helpers expect `lock` held (except `take_rate_limit`)."""

    def __init__(self, socket_mode: SocketModeEndpoint) -> None:
        self.lock = threading.RLock()
        self.team_id = TEAM_ID
        self.socket_mode = socket_mode
        self.served_at: str | None = None  # http://127.0.0.1:PORT while the HTTP server runs
        self.users: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, Channel] = {}
        self.usergroups: dict[str, dict[str, Any]] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.files: dict[str, dict[str, Any]] = {}
        self.response_urls: dict[str, ResponseUrl] = {}
        self.response_url_posts: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.rate_limits: dict[str, RateLimit] = {}
        self.views = ViewStore()
        # Streamed messages (chat.startStream) by (channel, ts), and how long Slack lets one stream after its
        # start (about five minutes on the live API; appends do not extend it). Tests may shorten it.
        self.streams: dict[tuple[str, str], Any] = {}
        self.stream_lifetime_s = 300.0
        self.last_ts = 0.0
        # Workflow Builder steps: the manifest's functions by callback id, and their executions by id (functions.py).
        self.functions: dict[str, dict[str, Any]] = {}
        self.executions: dict[str, Any] = {}

    @property
    def root_url(self) -> str:
        """http://127.0.0.1:PORT (no trailing slash)."""
        if self.served_at is None:
            raise RuntimeError("the stand-in is not started")
        return self.served_at

    def take_rate_limit(self, method: str) -> int | None:
        """The `Retry-After` of a pending rate limit on `method` (or on "*"), counting it used; None when none."""
        with self.lock:
            for key in (method, "*"):
                limit = self.rate_limits.get(key)
                if limit is not None and limit.remaining > 0:
                    limit.remaining -= 1
                    return limit.retry_after
        return None

    def channel(self, channel_id: Any) -> Channel:
        """A channel by id, or the Web API's `channel_not_found`."""
        ch = self.channels.get(str(channel_id or ""))
        if ch is None:
            raise ApiError("channel_not_found")
        return ch

    def direct_message(self, user_id: str) -> Channel:
        """The bot's direct messages with a member (opened on first use, as posting to a user id does in Slack); a bot
        user has none (Slack answers `cannot_dm_bot`)."""
        if self.user(user_id).get("is_bot"):
            raise ApiError("cannot_dm_bot")
        dm_id = "D" + user_id[1:]
        if dm_id not in self.channels:
            self.channels[dm_id] = Channel(dm_id, user_id, {user_id, BOT_USER_ID}, is_private=True)
        return self.channels[dm_id]

    def user(self, user_id: Any) -> dict[str, Any]:
        """A user by id, or the Web API's `user_not_found`."""
        user = self.users.get(str(user_id or ""))
        if user is None:
            raise ApiError("user_not_found")
        return user

    def next_ts(self) -> str:
        """A new message ts."""
        # Real ts values are epoch seconds with microseconds, unique per channel; keep them strictly increasing.
        now = max(time.time(), self.last_ts + 0.000001)
        self.last_ts = now
        return f"{now:.6f}"

    def post(
        self,
        ch: Channel,
        *,
        user: str,
        text: Any,
        blocks: Any,
        thread_ts: Any,
        files: list[dict[str, Any]] | None = None,
        metadata: Any = None,
    ) -> dict[str, Any]:
        """Add a message to a channel (a reply when `thread_ts` is set, keeping the parent's counters)."""
        ts = self.next_ts()
        msg: dict[str, Any] = {"type": "message", "ts": ts, "user": user, "text": text or "", "team": self.team_id}
        if user == BOT_USER_ID:
            msg["bot_id"] = BOT_ID
            msg["app_id"] = APP_ID
        if blocks:
            msg["blocks"] = copy.deepcopy(blocks)
        if files:
            msg["files"] = files
        if metadata:
            msg["metadata"] = metadata
        if thread_ts:
            parent = ch.find(thread_ts)
            if not is_top_level(parent):
                parent = ch.find(parent["thread_ts"])
            msg["thread_ts"] = parent["ts"]
            msg["parent_user_id"] = parent.get("user")
            parent["thread_ts"] = parent["ts"]
            parent["reply_count"] = parent.get("reply_count", 0) + 1
            users = parent.setdefault("reply_users", [])
            if user not in users:
                users.append(user)
            parent["reply_users_count"] = len(users)
            parent["latest_reply"] = ts
        ch.messages.append(msg)
        return msg


ApiMethod = Callable[[Workspace, dict[str, Any]], dict[str, Any]]
"""One Web API method: (workspace, arguments) -> the body's fields besides `ok`; raises ApiError."""


def is_top_level(msg: dict[str, Any]) -> bool:
    """Whether a message is in the channel itself (a thread parent or a plain message), not a reply."""
    return msg.get("thread_ts") in (None, msg["ts"])


def flag(value: Any) -> bool:
    """A boolean argument as Slack takes it (true/1, JSON or form-encoded)."""
    return str(value).lower() in ("true", "1")


def maybe_json(value: Any) -> Any:
    """An argument that is JSON when form-encoded (blocks, metadata, files), parsed; anything else as is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
