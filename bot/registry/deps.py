"""What every part of registration works with, held once so that all parts see the same collaborators."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bot.redact import redact
from bot.registry.actions import ApprovalAction
from bot.runs import RunService
from bot.slack.blocks import escape
from storage import repos

if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonGateway


@dataclass
class RegistryDeps:
    """The run service (threads, people, lookups), Polyaxon, and the approval settings of this process.

    `quorum` and `ttl` are read when a request is made and stored with it: a request keeps what it was made under.
    """

    runs: RunService
    gateway: PolyaxonGateway
    criteria_dir: Path
    reaction: str
    quorum: int
    ttl: timedelta
    # What each kind of approval request asks for (bot.registry.actions), by `ApprovalRequest.action`.
    actions: dict[str, ApprovalAction] = field(default_factory=dict)
    _bot_user: str | None = field(default=None, init=False)

    def bot_user(self) -> str | None:
        """The bot's own user id (auth.test, once): its own reactions are never judged."""
        if self._bot_user is None:
            try:
                self._bot_user = str(self.runs.client.auth_test().get("user_id") or "") or None
            except SlackApiError:
                return None
        return self._bot_user

    def action(self, name: str) -> ApprovalAction | None:
        """The hooks of an action; None for one this process was built without (its requests are left alone)."""
        return self.actions.get(name)

    def redact(self, exc: BaseException) -> str:
        """An error as it may be shown in Slack: secrets redacted, mrkdwn escaped."""
        return escape(redact(str(exc), extra_secrets=self.runs.secrets))

    def first_notice(self, request_id: int, user: str, code: str) -> bool:
        """Claim telling `user` the reason `code` on a request; True only the first time."""
        with self.runs.sessions() as s:
            return repos.record_notice(s, request_id=request_id, user=user, code=code)
