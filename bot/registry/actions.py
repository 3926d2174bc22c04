"""What an approval request asks for: one set of hooks per action, so every kind of approval shares one machine.

Registration, a preflight skip and a stage promotion are all approval requests with the same rules (approvers
only, never the requester, quorum, revocation, expiry, voided when the subject changes, audited). What differs
is what the subject is, how its digest is read now, the command that asks again, and what quorum or expiry
does: each action registers that here, on the registry's deps, and the reaction judge looks it up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.slack.blocks import escape
from storage.models import ApprovalRequest, Run


@dataclass(frozen=True)
class ApprovalAction:
    """The hooks of one action (`register`, `skip_preflight`, `promote`)."""

    # The subject's digest now; None when it can't be read (it is checked again before acting).
    digest: Callable[[ApprovalRequest, Run], str | None]
    # The command that asks for the same approval again.
    reissue: Callable[[ApprovalRequest, Run], str]
    # At quorum (called for every counted approval; the action claims the request once).
    on_quorum: Callable[[int], None]
    # What a change of voids the request: "the candidate", "the held run", "the version".
    subject: str = "the candidate"
    # How texts name the request's subject ("`tiny-chat`", "`tiny-chat:v1` → production").
    label: Callable[[ApprovalRequest], str] = lambda request: f"`{escape(request.model)}`"
    # After an open request expired unapproved (a held run is cancelled).
    on_expired: Callable[[ApprovalRequest, Run], None] | None = None
    # Why a digest change voids it, for the voided message.
    changed: str = "the candidate changed after it was made (new checkpoint, re-evaluation or different artifacts)"
    # Once carried out ("registered") and while it is being carried out ("being registered").
    done: str = "registered"
    doing: str = "being registered"
