"""Who is who: Slack user groups resolved to members, the runners and the approvers of the bot's settings."""

from __future__ import annotations

import time
from collections.abc import Sequence

from slack_sdk import WebClient

from bot.settings import Settings

GROUP_CACHE_S = 300


class People:
    """Resolves `FINETUNE_RUNNERS` and `FINETUNE_APPROVERS` (user IDs or S… user groups) to user IDs."""

    def __init__(self, *, settings: Settings, client: WebClient) -> None:
        self.settings = settings
        self.client = client
        self._group_cache: dict[str, tuple[float, set[str]]] = {}

    def members(self, ids: Sequence[str]) -> set[str]:
        """User IDs of `ids`, with S… user groups resolved through usergroups.users.list (cached 5 min)."""
        users: set[str] = set()
        for ident in ids:
            if not ident.startswith("S"):
                users.add(ident)
                continue
            cached = self._group_cache.get(ident)
            if cached and time.monotonic() - cached[0] < GROUP_CACHE_S:
                users |= cached[1]
                continue
            resp = self.client.usergroups_users_list(usergroup=ident)
            group = set(resp.get("users") or [])
            self._group_cache[ident] = (time.monotonic(), group)
            users |= group
        return users

    def may_run(self, user: str) -> bool:
        """Whether `user` may submit runs (FINETUNE_RUNNERS empty = everyone in the channel)."""
        runners = self.settings.finetune.runners
        return not runners or user in self.members(runners)

    def approvers(self) -> set[str]:
        """Everyone in FINETUNE_APPROVERS, groups resolved."""
        return self.members(self.settings.finetune.approvers)
