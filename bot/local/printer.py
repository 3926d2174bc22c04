"""Prints what a person in the local channel would see: messages, thread replies, edits, reactions, replies to them.

A new message is printed whole, as Slack shows it (mentions and channels by name, a link's label with its
address, `&lt;` as `<`); an edit of one already printed is one line of what changed (a status card is edited many
times per run); a streamed message (`logs RUN follow`) is printed as what it grew by, nothing when it did not grow;
a reaction is one line. A file the bot uploads (a compare or sweep plot) is saved under the store, and its line
says where. A modal the bot opens for the viewer is told in one line (`form run` fills the run form here).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bot.forms.fields import FORM_CALLBACK
from bot.local.messages import Names, as_shown, describe_edit, message_text, title
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL

THREAD_INDENT = "    │ "
FILES_FOLDER = "files"  # under the store: what the bot uploaded, one file per upload
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
RUN_FORM_OPENED = (
    "the run form opened (a modal in Slack); fill it here with `form run`: KEY=VALUE lines, "
    "then `preview`, `submit` or `cancel`"
)


@dataclass
class Printer:
    """Prints everything new in the stand-in's channel since the last `poll`, as one person sees it."""

    standin: SlackStandIn
    out: TextIO
    channel: str = DEFAULT_CHANNEL
    viewer: str = ""  # the member the shell acts as: their private replies read "(only you)"
    files_dir: Path | None = None  # where uploaded files are saved (None: they are only named)
    _saved: dict[str, Path] = field(default_factory=dict)
    _seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    _reactions: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    _replies_seen: int = 0
    _ephemerals_seen: int = 0
    _views_seen: set[str] = field(default_factory=set)
    _views_driven: bool = False  # the shell shows the modals it opens itself (`form run`)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def names(self) -> Names:
        """How the stand-in's ids read: members, user groups and channels by name."""
        return Names(user=self._name, group=self._group, channel=self._channel)

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
                    self._write(f"{self._only(post.get('user'))} {self._shown(payload)}", indent="")
            self._replies_seen = len(posts)
            ephemerals = self.standin.ephemerals(self.channel)
            for ephemeral in ephemerals[self._ephemerals_seen :]:
                self._write(f"{self._only(ephemeral.get('user'))} {self._shown(ephemeral)}", indent="")
            self._ephemerals_seen = len(ephemerals)
            self._show_direct_messages()
            self._show_views()

    def drive_views(self, driven: bool) -> None:
        """Whether the shell shows the viewer's modals itself (`form run`); those still open when it stops are not
        told."""
        with self._lock:
            if not driven:
                self._views_seen.update(str(view["id"]) for view in self.standin.views.open_views(self.viewer))
            self._views_driven = driven

    def _show_views(self) -> None:
        """One line for each modal the bot opened for the viewer that the shell is not showing itself."""
        for view in self.standin.views.open_views(self.viewer):
            view_id = str(view["id"])
            if view_id in self._views_seen:
                continue
            self._views_seen.add(view_id)
            if self._views_driven:
                continue
            if view.get("callback_id") == FORM_CALLBACK:
                self._write(f"» {RUN_FORM_OPENED}", indent="")
            else:
                name = str((view.get("title") or {}).get("text") or "untitled")
                self._write(
                    f"» the bot opened a modal, {name!r} (Slack shows it over the channel; the shell cannot)", indent=""
                )

    def _show_direct_messages(self) -> None:
        """The bot's direct messages to the person the shell acts as (`notify=dm`), new ones once each."""
        dm = "D" + self.viewer[1:] if self.viewer else ""
        if dm not in self.standin.state.channels:  # opened by the bot's first message to them
            return
        for message in self.standin.messages(dm):
            ts = str(message["ts"])
            if ts not in self._seen:
                self._write(f"[{ts}] (direct message to you) {self._shown(message)}", indent="")
                self._seen[ts] = {k: message.get(k) for k in ("text", "blocks", "files")}

    def _show(self, message: dict[str, Any], *, indent: str) -> None:
        ts = str(message["ts"])
        before = self._seen.get(ts)
        if before is None:
            self._write(f"[{ts}] (new) {self._shown(message)}", indent=indent)
        elif self._streamed(ts) and message_text(message).startswith(message_text(before)):
            # A streamed message (`logs RUN follow`) only grows: what came since the last poll, not a diff, and
            # nothing while it does not grow (it polls the log every few seconds, this every fraction of one).
            grown = message_text(message)[len(message_text(before)) :].strip("\n")
            if grown.strip():
                self._write(f"[{ts}] (streamed) {as_shown(grown, self.names)}", indent=indent)
        elif message_text(before) != message_text(message):
            change = describe_edit(before, message, self.names)
            line = f"(edited) {change}" if change else f"(edited, no visible change) {title(message, self.names)}"
            self._write(f"[{ts}] {line}", indent=indent)
        self._seen[ts] = {k: message.get(k) for k in ("text", "blocks", "files")}
        self._show_reactions(ts, message, indent=indent)

    def _streamed(self, ts: str) -> bool:
        return self.standin.stream_state(self.channel, ts) is not None

    def _shown(self, message: dict[str, Any]) -> str:
        """The message as Slack shows it, its files saved first so that their lines say where."""
        for item in message.get("files") or []:
            self._save(str(item.get("id")))
        return as_shown(message_text(message, self._saved), self.names)

    def _save(self, file_id: str) -> None:
        """Write an uploaded file's bytes under `files_dir`, once per file."""
        if self.files_dir is None or file_id in self._saved:
            return
        with self.standin.state.lock:
            entry = self.standin.state.files.get(file_id)
            if entry is None:
                return
            content, name = bytes(entry["content"]), str(entry["name"])
        # The upload's own name, made safe for a path; the file id keeps two uploads of `compare.png` apart.
        path = self.files_dir / f"{file_id}-{_UNSAFE.sub('_', Path(name).name) or 'file'}"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        self._saved[file_id] = path

    def _group(self, group_id: str) -> str:
        with self.standin.state.lock:
            group = self.standin.state.usergroups.get(group_id)
        return str(group.get("handle") or group_id) if group else group_id

    def _show_reactions(self, ts: str, message: dict[str, Any], *, indent: str) -> None:
        now = {(str(r["name"]), str(user)) for r in message.get("reactions") or [] for user in r.get("users") or []}
        before = self._reactions.get(ts, set())
        for name, user in sorted(now - before):
            self._write(f"[{ts}] (reaction) +:{name}: {self._name(user)}", indent=indent)
        for name, user in sorted(before - now):
            self._write(f"[{ts}] (reaction) −:{name}: {self._name(user)}", indent=indent)
        self._reactions[ts] = now

    def _channel(self, channel_id: str) -> str:
        with self.standin.state.lock:
            channel = self.standin.state.channels.get(channel_id)
        return channel.name if channel is not None else channel_id

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
