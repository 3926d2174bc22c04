"""What a requester's direct message says, and how each way of hearing is named. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from bot.grammar import NOTIFY_CHOICES, Notify
from bot.slack.blocks import escape

# Why a requester hears of a run: the ends a thread mention is for, and the stuck notice.
REASONS = ("succeeded", "failed", "stopped", "stuck")
# App Home's choices (an option's text: at most 75 characters).
NOTIFY_LABELS: dict[Notify, str] = {
    "thread": "Mention me in the run's thread",
    "dm": "Send me a direct message",
    "both": "Both: a mention and a direct message",
}
_HEADS = {
    "succeeded": (":white_check_mark:", "succeeded"),
    "failed": (":x:", "failed"),
    "stopped": (":octagonal_sign:", "was stopped"),
    "stuck": (":warning:", "may be stuck"),
}
SHOWN_METRICS = 4


def is_notify(value: object) -> TypeGuard[Notify]:
    """Whether a value is one of the three ways (a stored or handed-back value is checked again, never trusted)."""
    return isinstance(value, str) and value in NOTIFY_CHOICES


def metrics_summary(metrics: Mapping[str, Any], first: Sequence[str] = ()) -> str:
    """`eval_loss 1.23, train_loss 0.456`: the eval contract's metrics first, at most SHOWN_METRICS, numbers only."""
    names = [m for m in first if m in metrics] + sorted(k for k in metrics if k not in first)
    shown = [(k, metrics[k]) for k in names if isinstance(metrics[k], int | float) and not isinstance(metrics[k], bool)]
    parts = [f"{escape(k)} {v:.4g}" for k, v in shown[:SHOWN_METRICS]]
    if len(shown) > SHOWN_METRICS:
        parts.append("…")
    return ", ".join(parts)


def dm_text(*, reason: str, run_name: str, recipe: str, detail: str, link: str | None) -> str:
    """The direct message: `Your run NAME (recipe R) succeeded: eval_loss 1.23 · open its thread`.

    `detail` is Slack markup the caller escaped (metrics, a failure's title)."""
    emoji, verb = _HEADS.get(reason, (":information_source:", escape(reason)))
    text = f"{emoji} Your run `{escape(run_name)}` (recipe `{escape(recipe)}`) {verb}"
    text += f": {detail}" if detail else "."
    if link:
        text += f"\n<{link}|Open its thread>"
    return text


def tells_requester(status: str, failure: Mapping[str, Any] | None) -> bool:
    """Whether this end of a run is one its requester hears of: succeeded, stopped, or failed for good (an attempt
    whose retry starts is not an end)."""
    if status in ("succeeded", "stopped"):
        return True
    return status == "failed" and (failure or {}).get("retry") != "due"


def end_detail(
    status: str, *, metrics: Mapping[str, Any], contract: Mapping[str, Any] | None, failure: Mapping[str, Any] | None
) -> str:
    """What the direct message says after `succeeded:` / `failed:` (escaped markup): metrics, or what went wrong."""
    if status == "succeeded":
        return metrics_summary(metrics, [str(m) for m in (contract or {}).get("metrics") or []])
    failure = failure or {}
    if status == "failed" and failure.get("title"):
        why = str(failure.get("why") or "")
        return escape(str(failure["title"])) + (f". {escape(why)}" if why else "")
    if status == "stopped" and failure.get("kind") == "start_deadline":
        return escape(str(failure.get("title") or "it never started"))
    return ""
