"""Slack's message streaming (chat.startStream, appendStream, stopStream), its errors translated here.

slack_sdk's `chat_stream` helper (`ChatStream`) is not used: its buffer outlives a failed call and goes out again
with the next append (a follower that re-reads from its stored cursor would post those lines twice), it can only
append to a stream it started itself (a follow taken over from a dead replica must close that replica's stream),
and it sends a buffer of any length in one call (Slack takes 12,000 characters). The three methods are called
directly, one call per chunk the caller sized.
"""

from __future__ import annotations

import threading

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

# Per call, for `markdown_text` and each markdown chunk alike (docs.slack.dev, chat.appendStream).
MAX_MARKDOWN_CHARS = 12_000
# What Slack answers once a message no longer streams: stopped, ended by Slack after its lifetime (about five
# minutes), or stopped by a person in Slack's client.
CLOSED_ERRORS = frozenset({"message_not_in_streaming_state", "stopped_by_user", "message_not_found"})


class StreamError(Exception):
    """Slack refused a streaming call; `error` is Slack's error code."""

    def __init__(self, error: str) -> None:
        super().__init__(f"Slack answered {error}")
        self.error = error


class StreamClosed(StreamError):
    """The message no longer streams (see CLOSED_ERRORS): start another to go on."""


class MessageStreams:
    """Starts, appends to and stops streamed messages in threads, as the bot, for one recipient each."""

    def __init__(self, client: WebClient) -> None:
        self.client = client
        self._team_id: str | None = None
        self._lock = threading.Lock()

    def team_id(self) -> str:
        """The workspace's id (auth.test, asked once): a stream in a channel names its recipient's team."""
        with self._lock:
            if self._team_id is None:
                self._team_id = str(self._call(lambda: self.client.auth_test())["team_id"])
            return self._team_id

    def start(self, *, channel: str, thread_ts: str, recipient: str, markdown: str) -> str:
        """A new streamed reply in the thread; its ts."""
        team = self.team_id()
        response = self._call(
            lambda: self.client.chat_startStream(
                channel=channel,
                thread_ts=thread_ts,
                markdown_text=markdown,
                recipient_team_id=team,
                recipient_user_id=recipient,
            )
        )
        return str(response["ts"])

    def append(self, *, channel: str, ts: str, markdown: str) -> None:
        """Append one chunk (at most MAX_MARKDOWN_CHARS) to a streaming message."""
        self._call(lambda: self.client.chat_appendStream(channel=channel, ts=ts, markdown_text=markdown))

    def stop(self, *, channel: str, ts: str, markdown: str | None = None) -> None:
        """Stop a streaming message, with a last chunk."""
        self._call(lambda: self.client.chat_stopStream(channel=channel, ts=ts, markdown_text=markdown or None))

    @staticmethod
    def _call(call: object) -> dict[str, object]:
        try:
            response = call()  # type: ignore[operator]
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "unknown_error")
            raise (StreamClosed if error in CLOSED_ERRORS else StreamError)(error) from exc
        return dict(response.data) if isinstance(response.data, dict) else {}
