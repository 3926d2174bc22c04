"""Whether a failed attempt is retried, and from where: the recipe's `retry:` budget applied. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.catalog.policy import NEVER_RETRIED, attempts_allowed
from bot.failures.classify import TITLES


@dataclass(frozen=True)
class RetryDecision:
    """`due` (start attempt `next_attempt`) or `no`, and the sentence the thread gets."""

    retry: str
    why: str
    next_attempt: int | None = None


def decide_retry(
    policy: Mapping[str, Any] | None, kind: str, *, attempt: int, checkpoint_step: int | None
) -> RetryDecision:
    """Retry when the class is one the recipe retries and the budget has attempts left; never for the run's own
    faults (code, data, NaN), whatever the recipe says."""
    retry = (policy or {}).get("retry")
    title = TITLES.get(kind, kind)
    if not retry:
        return RetryDecision("no", f"Not retried: recipe sets no `retry:` policy ({title}).")
    total = attempts_allowed(policy)
    classes = [str(c) for c in retry.get("on") or []]
    if kind in NEVER_RETRIED or kind not in classes:
        never = " (a failure of this kind would repeat: never retried)" if kind in NEVER_RETRIED else ""
        return RetryDecision("no", f"Not retried: {title} is not one the recipe retries ({', '.join(classes)}){never}.")
    if attempt >= total:
        return RetryDecision("no", f"Not retried: attempt {attempt}/{total} was the last the recipe's budget allows.")
    start = (
        f"from `checkpoint-{checkpoint_step}`"
        if checkpoint_step is not None
        else "from the beginning (it saved no complete checkpoint)"
    )
    return RetryDecision(
        "due", f"{title}: retrying as attempt {attempt + 1}/{total} {start}.", next_attempt=attempt + 1
    )
