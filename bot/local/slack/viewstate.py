"""What the stand-in keeps of views: trigger ids it minted, open modals per user (a stack of at most 3), Home tabs.

Slack's rules kept here: a trigger id is good once, for 3 s, for the user whose action minted it; a modal stack
holds at most 3 views; each view has a `hash` that changes on every update, so an update that names an old
hash is refused (`hash_conflict`).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

TRIGGER_TTL_S = 3.0
MAX_STACK = 3


@dataclass
class Trigger:
    """A trigger id Slack sent with an interaction: whose, when, and whether a view was opened with it."""

    user: str
    issued_at: float
    used: bool = False


@dataclass
class StoredView:
    """One view as Slack holds it: the JSON `views.*` answer with, and whose it is."""

    user: str
    data: dict[str, Any]
    # The errors of the last `response_action: errors` answer, by block_id (cleared by the next submission).
    errors: dict[str, str] = field(default_factory=dict)
    closed: bool = False


@dataclass
class ViewStore:
    """Triggers, views by id, each user's modal stack and Home tab."""

    triggers: dict[str, Trigger] = field(default_factory=dict)
    views: dict[str, StoredView] = field(default_factory=dict)
    stacks: dict[str, list[str]] = field(default_factory=dict)  # user -> view ids, root first
    homes: dict[str, str] = field(default_factory=dict)  # user -> view id
    home_enabled: bool = True
    clock: Any = time.monotonic

    def mint_trigger(self, user: str) -> str:
        """A new trigger id for `user`, shaped like Slack's."""
        trigger_id = f"{secrets.randbelow(10**11)}.{secrets.randbelow(10**9)}.{secrets.token_hex(16)}"
        self.triggers[trigger_id] = Trigger(user=user, issued_at=self.clock())
        return trigger_id

    def stack(self, user: str) -> list[str]:
        """The user's open modals, root first (a copy)."""
        return list(self.stacks.get(user, []))


def new_view_id() -> str:
    """A view id shaped like Slack's (V + 10 characters)."""
    return "V" + secrets.token_hex(5).upper()


def new_hash() -> str:
    """A view hash shaped like Slack's (epoch seconds . random)."""
    return f"{int(time.time())}.{secrets.token_hex(4)}"
