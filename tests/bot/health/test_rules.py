"""The health rules on series of observations as the watcher makes them: each alert fires once, at the right step,
with its evidence; healthy series fire nothing; the pace and ETA come from the step rate since the last start."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.catalog.alerts import AlertsSpec, not_applying, trainer_alerts
from bot.health.render import alert_text, pace_text, sparkline
from bot.health.rules import NONFINITE, Alert, Eval, observe, pace

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
LOSS = Eval("eval_loss", higher_is_better=False)


def watch(
    rows: Iterable[Mapping[str, float]], *, trainer: str = "sft", spec: AlertsSpec | None = None, every_s: float = 10
) -> tuple[dict[str, Any], list[tuple[int, Alert]]]:
    """Observe one metrics row per step (step = its index + 1), `every_s` apart; the state and what fired."""
    state: dict[str, Any] = {}
    fired: list[tuple[int, Alert]] = []
    rules = trainer_alerts(trainer, spec)
    for i, row in enumerate(rows):
        state, now = observe(
            state, row, step=i + 1, now=T0 + timedelta(seconds=every_s * i), alerts=rules, evaluation=LOSS
        )
        fired += [(i + 1, alert) for alert in now]
    return state, fired


def test_a_healthy_run_fires_nothing() -> None:
    rows = [{"loss": 3.0 * 0.97**i, "eval_loss": 3.1 * 0.97**i, "num_tokens": 500.0 * (i + 1)} for i in range(40)]
    state, fired = watch(rows)
    assert fired == [] and state["alerted"] == {}


def test_nan_fires_once_from_the_trainers_count_and_names_it() -> None:
    rows = [{"loss": 3.0}, {"loss": 2.9}, {"loss": 2.8, NONFINITE: 1.0}, {"loss": 2.8, NONFINITE: 1.0}]
    rules = trainer_alerts("sft", AlertsSpec.model_validate({"nan": "stop"}))
    state: dict[str, Any] = {}
    told = []
    for i, row in enumerate(rows):
        state, now = observe(state, row, step=10 * (i + 1), now=T0, alerts=rules, evaluation=None,
                             nonfinite_keys="grad_norm, loss")  # fmt: skip
        told += now
    [alert] = told
    assert (alert.kind, alert.metric, alert.step, alert.action) == ("nan", "grad_norm, loss", 30, "stop")
    assert math.isnan(alert.value) and state["alerted"] == {"nan": 30}
    text = alert_text("sft-tiny-x", alert, stopped=True, resume_step=20)
    assert "*NaN*: grad_norm, loss at step 30" in text and "`/finetune resume sft-tiny-x checkpoint=step-20`" in text


def test_divergence_fires_when_the_smoothed_loss_passes_three_times_its_best_after_warmup() -> None:
    losses = [3.0, 2.0, 1.5, 1.2, 1.0, 1.0, 1.1, 2.0, 4.0, 8.0, 16.0, 32.0]
    _, fired = watch([{"loss": v} for v in losses])
    [(step, alert)] = fired
    assert alert.kind == "divergence" and step == 11 and "above 3 × its best" in alert.said, alert
    assert sparkline(alert.trend).endswith("█")


def test_a_high_first_loss_during_warmup_is_not_a_divergence() -> None:
    _, fired = watch([{"loss": v} for v in [50.0, 3.0, 2.0, 1.5, 1.2, 1.1, 1.0, 1.0]])
    assert fired == []


def test_plateau_fires_after_three_evaluations_not_better_than_the_best() -> None:
    evals = [3.0, 2.0, 1.5, 1.6, 1.6, 1.55, 1.7]  # the same value twice is the same evaluation seen again
    _, fired = watch([{"loss": 1.0, "eval_loss": v} for v in evals])
    [(step, alert)] = fired
    assert alert.kind == "plateau" and step == 7 and "for 3 evaluations" in alert.said, alert


def test_truncation_and_collapsed_rewards_for_grpo_only() -> None:
    rows = [{"loss": 0.1, "completions/clipped_ratio": 1.0, "reward_std": 0.0} for _ in range(4)]
    _, fired = watch(rows, trainer="grpo")
    assert [(step, a.kind) for step, a in fired] == [(3, "truncation"), (3, "collapsed_rewards")]
    _, fired = watch(rows, trainer="sft")  # SFT logs neither: not watched
    assert fired == []
    _, fired = watch([{"completions/clipped_ratio": 1.0} if i % 2 else {"completions/clipped_ratio": 0.5}
                      for i in range(10)], trainer="grpo")  # fmt: skip
    assert fired == []  # never three in a row


def test_kl_above_its_threshold() -> None:
    _, fired = watch([{"kl": 0.5}, {"kl": 4.0}, {"kl": 12.0}, {"kl": 15.0}], trainer="dpo")
    assert [(step, a.kind, a.value) for step, a in fired] == [(3, "kl", 12.0)]


def test_throughput_under_half_its_median_for_five_logs() -> None:
    tokens, rows = 0.0, []
    for i in range(14):
        tokens += 1000.0 if i < 8 else 300.0  # per 10 s: 100 tokens/s, then 30
        rows.append({"loss": 1.0, "num_tokens": tokens})
    _, fired = watch(rows)
    [(step, alert)] = fired
    # Rates start at the second log; the 9th (step 9) is the first slow one, the 5th slow in a row is at step 13.
    assert alert.kind == "throughput" and step == 13 and alert.metric == "tokens/s", alert


def test_the_recipe_sets_thresholds_windows_and_turns_alerts_off() -> None:
    spec = AlertsSpec.model_validate({"divergence": {"threshold": 10}, "plateau": "off", "nan": "stop"})
    rules = trainer_alerts("sft", spec)
    assert rules["divergence"] == {"action": "warn", "threshold": 10.0, "window": 5}
    assert "plateau" not in rules and rules["nan"]["action"] == "stop"
    assert "truncation" not in rules and "kl" not in rules
    refused = not_applying("sft", AlertsSpec.model_validate({"truncation": "warn"}))
    assert refused == ["truncation (only for grpo, rloo)"]
    with pytest.raises(ValueError, match="Input should be 'warn', 'stop' or 'off'"):
        AlertsSpec.model_validate({"nan": "halt"})
    with pytest.raises(ValueError, match="Extra inputs"):
        AlertsSpec.model_validate({"nans": "warn"})


def test_pace_and_eta_from_the_step_rate_since_the_last_start() -> None:
    state, _ = watch([{"loss": 1.0, "num_tokens": 1850.0 * 10 * (i + 1)} for i in range(12)], every_s=10)
    measured = pace(state, total=120)
    assert measured.steps_per_s == pytest.approx(0.1) and measured.eta_s == pytest.approx(1080)
    assert measured.tokens_per_s == pytest.approx(1850)
    assert pace_text(12, 120, measured) == " · 10 % · ETA 18 min · 1,850 tokens/s"
    # A resume starts again from an earlier step: the rate counts from there, not across the restart.
    state, _ = observe(state, {"loss": 1.0}, step=5, now=T0 + timedelta(hours=1), alerts={}, evaluation=None)
    assert pace(state, total=120).steps_per_s is None


def test_trls_names_are_read_as_polyaxon_stores_them() -> None:
    rows = [{"loss": 0.1, "completions__clipped_ratio": 1.0} for _ in range(3)]  # `/` is `__` in Polyaxon's events
    _, fired = watch(rows, trainer="grpo")
    assert [(step, a.kind, a.metric) for step, a in fired] == [(3, "truncation", "completions/clipped_ratio")]
