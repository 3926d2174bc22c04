"""The `conversations.*` family: history, replies, info, members."""

from __future__ import annotations

import copy
from typing import Any

from bot.local.slack.state import BOT_USER_ID, ApiError, ApiMethod, Channel, Workspace, flag, is_top_level


def channel_json(ws: Workspace, ch: Channel) -> dict[str, Any]:
    """A channel as conversations.info describes it to the bot."""
    im = ch.id.startswith("D")  # the bot's direct messages with a member (bot.local.slack.state.direct_message)
    return {
        "id": ch.id,
        "name": ch.name,
        "is_channel": not ch.is_private and not im,
        "is_group": ch.is_private and not im,
        "is_im": im,
        "is_private": ch.is_private,
        "is_member": BOT_USER_ID in ch.members,
        "is_archived": False,
        "num_members": len(ch.members),
        "context_team_id": ws.team_id,
    }


def history(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """conversations.history: top-level messages, newest first, one page."""
    ch = ws.channel(args.get("channel"))
    limit = int(args.get("limit") or 100)
    top = [m for m in ch.messages if is_top_level(m)]
    top.reverse()
    return {
        "messages": copy.deepcopy(top[:limit]),
        "has_more": len(top) > limit,
        "response_metadata": {"next_cursor": ""},
    }


def replies(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """conversations.replies: a thread, parent first, from the ts of any message in it."""
    ch = ws.channel(args.get("channel"))
    try:
        parent = ch.find(args.get("ts"))
    except ApiError as err:
        raise ApiError("thread_not_found") from err
    root = parent["ts"] if is_top_level(parent) else parent["thread_ts"]
    thread = copy.deepcopy([m for m in ch.messages if m["ts"] == root or m.get("thread_ts") == root])
    if not flag(args.get("include_all_metadata")):
        # Slack returns message metadata only when asked for it.
        for message in thread:
            message.pop("metadata", None)
    return {"messages": thread, "has_more": False, "response_metadata": {"next_cursor": ""}}


def visible(ws: Workspace, channel_id: Any) -> Channel:
    """A channel the bot may read about: a private one it is not in answers `channel_not_found`, as in Slack."""
    ch = ws.channel(channel_id)
    if ch.is_private and BOT_USER_ID not in ch.members:
        raise ApiError("channel_not_found")
    return ch


def info(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """conversations.info."""
    return {"channel": channel_json(ws, visible(ws, args.get("channel")))}


def members(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """conversations.members: member ids, paged by `limit` (at most 1000) with a cursor (an offset, opaque)."""
    ch = visible(ws, args.get("channel"))
    try:
        limit = max(1, min(int(args.get("limit") or 100), 1000))
    except ValueError:
        raise ApiError("invalid_limit") from None
    cursor = str(args.get("cursor") or "0")
    if not cursor.isdigit():
        raise ApiError("invalid_cursor")
    start = int(cursor)
    ids = sorted(ch.members)
    page = ids[start : start + limit]
    more = start + limit < len(ids)
    return {"members": page, "response_metadata": {"next_cursor": str(start + limit) if more else ""}}


METHODS: dict[str, ApiMethod] = {
    "conversations.history": history,
    "conversations.replies": replies,
    "conversations.info": info,
    "conversations.members": members,
}
