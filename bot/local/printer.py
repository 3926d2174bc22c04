"""Prints what a person in the local channel would see: messages, thread replies, edits, reactions, replies to them.

A new message is printed whole; an edit of one already printed is one line of what changed (a status card
is edited many times per run); a reaction is one line.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, TextIO

from bot.local.messages import describe_edit, message_text, title
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL

THREAD_INDENT = "    │ "


@dataclass
class Printer:
    """Prints everything new in the stand-in's channel since the last `poll`, as one person sees it."""

    standin: SlackStandIn
    out: TextIO
    channel: str = DEFAULT_CHANNEL
    viewer: str = ""  # the member the shell acts as: their private replies read "(only you)"
    _seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    _reactions: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    _replies_seen: int = 0
    _ephemerals_seen: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def poll(self) -> None:
        """Print everything new since the last poll."""
        with self._lock:
            for message in self.standin.messages(self.channel):
                self._show(message, indent="")
                for reply in self.standin.replies(self.channel, message["ts"]):
                    self._show(reply, indent=THREAD_INDENT)
            posts = self.standin.response_url_posts(self.channel)
            for post in posts[self._replies_seen :]:
                payload = post["payload"]
                # An in-channel reply is also a channel message, printed as such.
                if payload.get("response_type") != "in_channel" and message_text(payload):
                    self._write(f"{self._only(post.get('user'))} {message_text(payload)}", indent="")
            self._replies_seen = len(posts)
            ephemerals = self.standin.ephemerals(self.channel)
            for ephemeral in ephemerals[self._ephemerals_seen :]:
                self._write(f"{self._only(ephemeral.get('user'))} {message_text(ephemeral)}", indent="")
            self._ephemerals_seen = len(ephemerals)

    def _show(self, message: dict[str, Any], *, indent: str) -> None:
        ts = str(message["ts"])
        before = self._seen.get(ts)
        if before is None:
            self._write(f"[{ts}] (new) {message_text(message)}", indent=indent)
        elif message_text(before) != message_text(message):
            change = describe_edit(before, message)
            line = f"(edited) {change}" if change else f"(edited, no visible change) {title(message)}"
            self._write(f"[{ts}] {line}", indent=indent)
        self._seen[ts] = {k: message.get(k) for k in ("text", "blocks", "files")}
        self._show_reactions(ts, message, indent=indent)

    def _show_reactions(self, ts: str, message: dict[str, Any], *, indent: str) -> None:
        now = {(str(r["name"]), str(user)) for r in message.get("reactions") or [] for user in r.get("users") or []}
        before = self._reactions.get(ts, set())
        for name, user in sorted(now - before):
            self._write(f"[{ts}] (reaction) +:{name}: {self._name(user)}", indent=indent)
        for name, user in sorted(before - now):
            self._write(f"[{ts}] (reaction) −:{name}: {self._name(user)}", indent=indent)
        self._reactions[ts] = now

    def _name(self, user_id: str) -> str:
        with self.standin.state.lock:
            user = self.standin.state.users.get(user_id)
        return str(user["name"]) if user else user_id

    def _only(self, user_id: Any) -> str:
        if not user_id or user_id == self.viewer:
            return "(only you)"
        return f"(only {self._name(str(user_id))})"

    def _write(self, text: str, *, indent: str) -> None:
        for line in text.splitlines() or [""]:
            self.out.write(f"{indent}{line}\n")
        self.out.flush()
