"""`response_url`s: minted for slash commands and interactions, posted to by the app, recorded here."""

from __future__ import annotations

import copy
import secrets
from typing import Any

from bot.local.slack.limits import message_error
from bot.local.slack.state import BOT_USER_ID, TEAM_ID, ResponseUrl, Workspace


def mint(ws: Workspace, *, channel: str | None, user: str | None) -> str:
    """A new `response_url` answering in `channel` to `user`."""
    rid = secrets.token_hex(8)
    with ws.lock:
        ws.response_urls[rid] = ResponseUrl(rid, channel, user)
    return f"{ws.root_url}/hooks/response/{TEAM_ID}/{rid}"


def receive(ws: Workspace, rid: str, payload: dict[str, Any]) -> tuple[int, bytes]:
    """A post to a minted response_url: validate like Slack, record it; (HTTP status, plain-text body)."""
    with ws.lock:
        target = ws.response_urls.get(rid)
        if target is None:
            return 404, b"no_active_hooks"
        problem = message_error(
            payload.get("text"), payload.get("blocks"), require_content=not payload.get("delete_original")
        )
        if problem is not None:
            return 400, problem[0].encode()
        ws.response_url_posts.append(
            {"url_id": rid, "channel": target.channel, "user": target.user, "payload": copy.deepcopy(payload)}
        )
        if payload.get("response_type") == "in_channel" and target.channel in ws.channels:
            ws.post(
                ws.channels[target.channel],
                user=BOT_USER_ID,
                text=payload.get("text", ""),
                blocks=payload.get("blocks"),
                thread_ts=payload.get("thread_ts"),
            )
    return 200, b"ok"
