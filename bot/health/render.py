"""What an alert says in a run's thread, and the pace a card shows. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bot.health.rules import Alert, Pace
from bot.slack.blocks import ButtonAction, command_button, context, escape, human_duration, section

TITLES = {
    "nan": "NaN",
    "divergence": "Diverging",
    "plateau": "Plateau",
    "truncation": "Every completion truncated",
    "collapsed_rewards": "Rewards collapsed",
    "kl": "KL above its limit",
    "throughput": "Throughput dropped",
}
HINTS = {
    "nan": "lower the learning rate or clip gradients (`max_grad_norm`), then resume from a checkpoint before it",
    "divergence": "lower the learning rate or raise the warmup, then resume from a checkpoint before it rose",
    "plateau": "it may have learnt what it can: stop it and compare, or change the learning rate or data",
    "truncation": "raise `max_completion_length` or ask for shorter answers: the reward sees cut-off completions",
    "collapsed_rewards": "every completion of a prompt scores the same: no learning signal; check the reward "
    "functions or raise the temperature",
    "kl": "lower the learning rate or raise `beta`: the policy is drifting far from its reference",
    "throughput": "the node may be throttled or shared: check its load, or stop and resume elsewhere",
}
_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float]) -> str:
    """`▁▂▄█`: the values' trend in one short line (empty for fewer than two finite values)."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return ""
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    return "".join(_BARS[min(7, int((v - low) / span * 7.999))] if math.isfinite(v) else "×" for v in values)


def alert_text(run_name: str, alert: Alert, *, stopped: bool, resume_step: int | None) -> str:
    """The thread's post of one alert: what fired, the evidence, what to do; said once per kind per run."""
    at = f" at step {alert.step}" if alert.step is not None else ""
    value = "" if math.isnan(alert.value) else f" `{alert.value:.4g}`"
    trend = sparkline(alert.trend)
    lines = [
        f":rotating_light: *{TITLES[alert.kind]}*: {escape(alert.metric)}{value}{at}, {escape(alert.said)}"
        + (f"  `{trend}`" if trend else "")
    ]
    if stopped:
        again = (
            f"`/finetune resume {escape(run_name)} checkpoint=step-{resume_step}`"
            if resume_step is not None
            else "no checkpoint was kept before it, so start it again"
        )
        lines.append(
            f":octagonal_sign: Stopped by the recipe's `alerts: {{{alert.kind}: stop}}`; continue with {again}."
        )
    lines.append(f":bulb: {escape(HINTS[alert.kind])}")
    return "\n".join(lines)


def alert_blocks(run_name: str, text: str, *, stopped: bool) -> list[dict[str, Any]]:
    """The post's blocks: its text, and a Stop button while the run goes on."""
    blocks = [section(text)]
    if not stopped:
        blocks.append(
            {
                "type": "actions",
                "elements": [command_button("Stop", ButtonAction.STOP, run_name, suffix="alert-stop", style="danger")],
            }
        )
    blocks.append(
        context("Each alert is told once per run; the recipe's `alerts:` sets thresholds, windows and `stop`.")
    )
    return blocks


def pace_text(step: int | None, total: int | None, pace: Pace) -> str:
    """` · 30 % · ETA 4 min · 1,850 tokens/s` after the card's step (empty when nothing is measured yet)."""
    parts = []
    if step is not None and total:
        parts.append(f"{min(100, round(100 * step / total))} %")
    if pace.eta_s is not None:
        parts.append(f"ETA {human_duration(pace.eta_s)}")
    if pace.tokens_per_s is not None:
        parts.append(f"{pace.tokens_per_s:,.0f} tokens/s")
    return "".join(f" · {part}" for part in parts)


def badge(alerted: Sequence[str]) -> str:
    """The card's line for the alerts that fired (empty when none did)."""
    if not alerted:
        return ""
    return ":rotating_light: *Alerts*: " + ", ".join(TITLES.get(kind, kind) for kind in alerted) + " (see the thread)"
