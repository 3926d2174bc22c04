"""What a run command answers: a `Reply`, or a `RunError` the user can fix (nothing was changed)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from bot.grammar import CommandError
from bot.slack.blocks import section


class RunError(CommandError):
    """A user error about runs (unknown run, not allowed, incompatible resume); nothing was changed.

    Its messages mention people (<@U…>); run references in them passed the grammar's run-ref check.
    """

    mrkdwn = True


class Reply(BaseModel):
    """What the handler sends back to the user (ephemeral unless said otherwise)."""

    text: str
    blocks: list[dict[str, Any]] = Field(default_factory=list)

    def as_blocks(self) -> list[dict[str, Any]]:
        """The blocks, or the text as one section."""
        return self.blocks or [section(self.text)]
