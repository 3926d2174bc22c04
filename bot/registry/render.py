"""The registry's messages: the approval request with its criteria and evidence, and version naming. Pure."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bot.registry.policy import Candidate, CriterionResult
from bot.slack.blocks import context, escape, header, mention, section


def polyaxon_version_name(model: str, version: str) -> str:
    """The model version's name in Polyaxon's project registry (one namespace per project: model and version)."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{model}-{version}".lower()).strip("-")


def next_version(taken: set[str]) -> str:
    """`v1`, `v2`, … : one more than the highest `vN` already taken."""
    numbers = [int(v[1:]) for v in taken if re.fullmatch(r"v\d+", v)]
    return f"v{max(numbers, default=0) + 1}"


def render_request(
    *,
    model: str,
    version: str | None,
    candidate: Candidate,
    results: list[CriterionResult],
    criteria_label: str,
    requester: str,
    run_requester: str,
    reaction: str,
    quorum: int,
    expires_at: datetime,
) -> list[dict[str, Any]]:
    """The approval request message: the candidate, every criterion with its evidence, how to approve."""
    evals = " · ".join(f"{escape(k)} `{v:.4g}`" for k, v in sorted(candidate.eval_results.items())) or "none"
    pins = " · ".join(f"{escape(k)} `{escape(str(v))}`" for k, v in sorted(candidate.pins.items())) or "none"
    candidate_lines = [
        f"*Run* `{escape(candidate.run_name)}` (`{escape(str(candidate.run_uuid))}`)",
        f"*Checkpoint* `{escape(candidate.checkpoint_path or 'none')}`"
        f" · digest `{escape(candidate.checkpoint_digest or 'none')}`",
        f"*Eval results* {evals}",
        f"*Eval contract* `{escape(candidate.eval_contract_hash or 'none')}`",
        f"*Pins* {pins}",
        f"*Artifacts* {escape(', '.join(candidate.artifacts)) or 'none'}",
    ]
    passed = sum(r.passed for r in results)
    criteria_lines = [
        f"{':white_check_mark:' if r.passed else ':x:'} *{escape(r.name)}* — {escape(r.evidence)}" for r in results
    ]
    label = f"{model}:{version}" if version else f"{model} (next version)"
    self_rule = mention(requester) + (f" and {mention(run_requester)}" if run_requester != requester else "")
    return [
        header(f"Approval request: register {label}"),
        section("\n".join(candidate_lines)),
        section(
            f"*Criteria* ({escape(criteria_label)}: {passed}/{len(results)} pass; failing criteria are shown, "
            "not blocking)\n" + "\n".join(criteria_lines)
        ),
        context(
            f"Requested by {mention(requester)}. {quorum} approval(s) needed: react with :{reaction}: on "
            f"*this* message (approvers only; not {self_rule}). Removing the reaction before registration revokes it. "
            f"Expires {expires_at:%Y-%m-%d %H:%M} UTC. Candidate digest `{candidate.digest()[:12]}`."
        ),
    ]
