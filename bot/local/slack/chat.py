"""The `chat.*` family: postMessage, update, postEphemeral, getPermalink."""

from __future__ import annotations

import copy
from typing import Any

from bot.local.slack.limits import message_error
from bot.local.slack.state import (
    BOT_USER_ID,
    TEAM_DOMAIN,
    ApiError,
    ApiMethod,
    Workspace,
    flag,
    is_top_level,
    maybe_json,
)


def check_message(args: dict[str, Any], *, require_content: bool = True) -> tuple[Any, Any]:
    """The message's text and parsed blocks, or the error Slack answers for them."""
    text = args.get("text")
    blocks = maybe_json(args.get("blocks"))
    problem = message_error(text, blocks, require_content=require_content)
    if problem is not None:
        error, details = problem
        extra = {"errors": details, "response_metadata": {"messages": details}} if details else {}
        raise ApiError(error, **extra)
    return text, blocks


def post_message(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.postMessage, as the bot (to a user id: in the bot's direct messages with that user, as Slack does)."""
    target = str(args.get("channel") or "")
    ch = ws.direct_message(target) if target.startswith(("U", "W")) else ws.channel(target)
    if BOT_USER_ID not in ch.members:
        raise ApiError("not_in_channel")
    text, blocks = check_message(args)
    msg = ws.post(
        ch,
        user=BOT_USER_ID,
        text=text,
        blocks=blocks,
        thread_ts=args.get("thread_ts"),
        metadata=maybe_json(args.get("metadata")),
    )
    if msg.get("thread_ts") and flag(args.get("reply_broadcast")):
        # "Also send to channel": one message, in the thread and in the channel's history.
        msg["subtype"] = "thread_broadcast"
    return {"channel": ch.id, "ts": msg["ts"], "message": copy.deepcopy(msg)}


def update(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.update, of one of the bot's own messages."""
    ch = ws.channel(args.get("channel"))
    msg = ch.find(args.get("ts"))
    if msg.get("user") != BOT_USER_ID:
        raise ApiError("cant_update_message")
    text, blocks = check_message(args, require_content=False)
    if text is not None:
        msg["text"] = text
    if blocks is not None:
        msg["blocks"] = copy.deepcopy(blocks)
    msg["edited"] = {"user": BOT_USER_ID, "ts": ws.next_ts()}
    return {"channel": ch.id, "ts": msg["ts"], "text": msg["text"], "message": copy.deepcopy(msg)}


def post_ephemeral(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.postEphemeral: recorded apart from the channel's messages."""
    ch = ws.channel(args.get("channel"))
    user = ws.user(args.get("user"))
    if BOT_USER_ID not in ch.members:
        raise ApiError("not_in_channel")
    if user["id"] not in ch.members:
        raise ApiError("user_not_in_channel")
    text, blocks = check_message(args)
    message_ts = ws.next_ts()
    ws.ephemerals.append(
        {
            "channel": ch.id,
            "user": user["id"],
            "text": text or "",
            "blocks": copy.deepcopy(blocks),
            "thread_ts": args.get("thread_ts"),
            "message_ts": message_ts,
        }
    )
    return {"message_ts": message_ts}


def get_permalink(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.getPermalink, with the thread in the query for a reply."""
    ch = ws.channel(args.get("channel"))
    msg = ch.find(args.get("message_ts"))
    link = f"https://{TEAM_DOMAIN}.slack.local/archives/{ch.id}/p{msg['ts'].replace('.', '')}"
    if not is_top_level(msg):
        link += f"?thread_ts={msg['thread_ts']}&cid={ch.id}"
    return {"channel": ch.id, "permalink": link}


METHODS: dict[str, ApiMethod] = {
    "chat.postMessage": post_message,
    "chat.update": update,
    "chat.postEphemeral": post_ephemeral,
    "chat.getPermalink": get_permalink,
}
