"""The `users.*` and `usergroups.*` families: users.info, usergroups.users.list."""

from __future__ import annotations

import copy
from typing import Any

from bot.local.slack.state import ApiError, ApiMethod, Workspace


def user_record(
    team_id: str, user_id: str, name: str, *, real_name: str | None, is_bot: bool, tz: str
) -> dict[str, Any]:
    """A workspace member as users.info returns it."""
    return {
        "id": user_id,
        "team_id": team_id,
        "name": name,
        "real_name": real_name or name.title(),
        "deleted": False,
        "is_bot": is_bot,
        "is_admin": False,
        "tz": tz,
        "profile": {"real_name": real_name or name.title(), "display_name": name},
    }


def users_info(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """users.info."""
    return {"user": copy.deepcopy(ws.user(args.get("user")))}


def usergroups_users_list(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """usergroups.users.list: the members of one user group."""
    group = ws.usergroups.get(str(args.get("usergroup") or ""))
    if group is None:
        raise ApiError("no_such_subteam")
    return {"users": list(group["users"])}


METHODS: dict[str, ApiMethod] = {
    "users.info": users_info,
    "usergroups.users.list": usergroups_users_list,
}
