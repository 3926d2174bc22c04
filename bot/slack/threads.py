"""Reading the bot's own messages back: permalinks, and finding a post in a thread by its message metadata.

A restarted bot cannot know whether a post went out just before it died; Slack is then the only witness.
Posts that must go out exactly once carry message metadata (`event_type` + `event_payload`), and the bot
reads the thread back before posting again (the one read it does, hence the `channels:history` scope).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)


def permalink(client: WebClient, channel: str, ts: str | None) -> str | None:
    """A message's permalink (chat.getPermalink), or None."""
    if not ts:
        return None
    try:
        return str(client.chat_getPermalink(channel=channel, message_ts=ts).get("permalink") or "") or None
    except SlackApiError:
        return None


def find_thread_post(
    client: WebClient, *, channel: str, thread_ts: str | None, event_type: str, payload: dict[str, Any], label: str
) -> str | None:
    """The ts of a post in the thread whose message metadata is `event_type` with `payload`, or None.

    None too when the thread can't be read (e.g. without the channels:history scope): the caller then
    posts, at least once rather than never. `label` names the thread in the log.
    """
    if not thread_ts:
        return None
    cursor: str | None = None
    while True:
        try:
            resp = client.conversations_replies(
                channel=channel, ts=thread_ts, include_all_metadata=True, limit=200, cursor=cursor
            )
        except SlackApiError as exc:
            log.warning(
                "can't read the thread of %s back (%s; channels:history is needed): posting, which may repeat",
                label,
                exc.response.get("error"),
            )
            return None
        for message in resp.get("messages") or []:
            meta = message.get("metadata") or {}
            found = meta.get("event_payload") or {}
            if meta.get("event_type") == event_type and all(found.get(k) == v for k, v in payload.items()):
                return str(message["ts"])
        cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor:
            return None
