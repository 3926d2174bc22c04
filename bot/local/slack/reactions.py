"""The `reactions.*` family: add, remove, get; the same state changes back a human's reactions."""

from __future__ import annotations

import copy
from typing import Any

from bot.local.slack.state import BOT_USER_ID, ApiError, ApiMethod, Channel, Workspace


def add_reaction(ch: Channel, ts: Any, name: Any, user: str) -> None:
    """`user` reacts with `name` on a message (`already_reacted` the second time)."""
    if not name:
        raise ApiError("invalid_name")
    msg = ch.find(ts)
    reactions = msg.setdefault("reactions", [])
    for r in reactions:
        if r["name"] == name:
            if user in r["users"]:
                raise ApiError("already_reacted")
            r["users"].append(user)
            r["count"] = len(r["users"])
            return
    reactions.append({"name": str(name).strip(":"), "users": [user], "count": 1})


def remove_reaction(ch: Channel, ts: Any, name: Any, user: str) -> None:
    """`user` takes back a reaction (`no_reaction` when there is none)."""
    msg = ch.find(ts)
    for r in msg.get("reactions", []):
        if r["name"] == name and user in r["users"]:
            r["users"].remove(user)
            r["count"] = len(r["users"])
            if not r["users"]:
                msg["reactions"].remove(r)
            if not msg["reactions"]:
                del msg["reactions"]
            return
    raise ApiError("no_reaction")


def add(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """reactions.add, as the bot."""
    add_reaction(ws.channel(args.get("channel")), args.get("timestamp"), args.get("name"), BOT_USER_ID)
    return {}


def remove(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """reactions.remove, as the bot."""
    remove_reaction(ws.channel(args.get("channel")), args.get("timestamp"), args.get("name"), BOT_USER_ID)
    return {}


def get(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """reactions.get: the message with its reactions."""
    ch = ws.channel(args.get("channel"))
    msg = ch.find(args.get("timestamp"))
    return {"type": "message", "channel": ch.id, "message": copy.deepcopy(msg)}


METHODS: dict[str, ApiMethod] = {
    "reactions.add": add,
    "reactions.remove": remove,
    "reactions.get": get,
}
