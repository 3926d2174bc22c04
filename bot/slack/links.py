"""Links into the workspace: a message's archive link, built from the workspace's address (auth.test, once)."""

from __future__ import annotations

import threading

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError


def archive_link(base: str | None, channel: str, ts: str | None) -> str | None:
    """`https://team.slack.com/archives/C…/p…` for a message, or None without a base or a ts."""
    if not base or not ts:
        return None
    return f"{base.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"


class WorkspaceAddress:
    """The workspace's address, asked once (auth.test) and kept; None while Slack cannot say."""

    def __init__(self, client: WebClient) -> None:
        self.client = client
        self._url: str | None = None
        self._lock = threading.Lock()

    def url(self) -> str | None:
        """`https://team.slack.com/`, or None when auth.test fails (links are left out, nothing else)."""
        with self._lock:
            if self._url is None:
                try:
                    self._url = str(self.client.auth_test().get("url") or "")
                except SlackApiError:
                    return None
            return self._url or None

    def message(self, channel: str, ts: str | None) -> str | None:
        """A message's archive link."""
        return archive_link(self.url(), channel, ts)
