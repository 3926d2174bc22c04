"""Training health, pure: what a run's latest metrics say about it, one observation at a time.

The watcher sees a running run's metrics as Polyaxon's summary sync left them in the run's outputs (the last
value of each) whenever the run changed: no request of its own. Each observation moves the run's health state
(stored with the run, so a restarted bot goes on where it was) and may fire alerts, each kind at most once per run:

- `nan`: the trainer counted a non-finite loss, gradient norm or eval metric (`nonfinite_values`; Polyaxon keeps
  no NaN), or a value arrived non-finite;
- `divergence`: the training loss, smoothed (EMA 0.3), above `threshold` × its best smoothed value, once `window`
  logs are in (warmup);
- `plateau`: the ranking metric not better than its best for `window` evaluations;
- `truncation`: TRL's `completions/clipped_ratio` at `threshold` (every completion hit `max_completion_length`) for
  `window` logs;
- `collapsed_rewards`: the reward's standard deviation within groups (`reward_std`) at most `threshold` for
  `window` logs: no learning signal;
- `kl`: the policy's `kl` to its reference above `threshold`;
- `throughput`: tokens/s (from `num_tokens` over time) under `threshold` × the run's own median for `window` logs.

Progress and ETA come from the same state: the step rate since the run's last (re)start.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

EMA = 0.3
MIN_RATES = 8  # throughput measurements before the run's own median means anything
HISTORY = 20  # values kept per watched series (the evidence's sparkline, the throughput median)
NONFINITE = "nonfinite_values"  # the trainer's count of non-finite values it could not log
NONFINITE_KEYS = "nonfinite_keys"  # which metrics they were, in its outputs


@dataclass(frozen=True)
class Alert:
    """One alert: its kind, the metric and step it fired on, the value, what it crossed, the recent values."""

    kind: str
    metric: str
    step: int | None
    value: float
    said: str  # the rule in words: `above 3 × its best smoothed value 1.21`
    trend: tuple[float, ...]
    action: str  # warn or stop


@dataclass(frozen=True)
class Eval:
    """The ranking metric the plateau rule watches, and which way is better."""

    metric: str
    higher_is_better: bool


def _series(state: dict[str, Any], name: str, value: float) -> list[float]:
    values = [*state.get("series", {}).get(name, []), value][-HISTORY:]
    state.setdefault("series", {})[name] = values
    return values


def _streak(state: dict[str, Any], name: str, holds: bool) -> int:
    count = int(state.get("streaks", {}).get(name, 0)) + 1 if holds else 0
    state.setdefault("streaks", {})[name] = count
    return count


def observe(
    state: Mapping[str, Any],
    metrics: Mapping[str, float],
    *,
    step: int | None,
    now: datetime,
    alerts: Mapping[str, Mapping[str, Any]],
    evaluation: Eval | None,
    nonfinite_keys: str = "",
) -> tuple[dict[str, Any], list[Alert]]:
    """The run's new health state after one observation of its latest metrics (its pace, then the rules), and the
    alerts it fires (each kind once per run: the state remembers what fired)."""
    return judge(
        paced(state, step, now),
        metrics,
        step=step,
        now=now,
        alerts=alerts,
        evaluation=evaluation,
        nonfinite_keys=nonfinite_keys,
    )


def alarming(metrics: Mapping[str, float]) -> dict[str, float]:
    """What the `nan` rule reads of a row (judged at once, without a window, from the newest values listed)."""
    return {k: v for k, v in metrics.items() if k == NONFINITE or not math.isfinite(v)}


def paced(state: Mapping[str, Any], step: int | None, now: datetime) -> dict[str, Any]:
    """The state with the run's step at `now`: the step rate is measured since its last (re)start, and the
    baseline moves when the step goes back."""
    new: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in state.items()}
    if step is None:
        return new
    stamp = now.timestamp()
    if new.get("since") is None or step < int(new.get("step", step)):  # first seen, or (re)started lower
        new["since"] = {"step": step, "t": stamp}
        new.pop("tokens", None)
    new["step"], new["t"] = step, stamp
    return new


def judge(
    state: Mapping[str, Any],
    metrics: Mapping[str, float],
    *,
    step: int | None,
    now: datetime,
    alerts: Mapping[str, Mapping[str, Any]],
    evaluation: Eval | None,
    nonfinite_keys: str = "",
) -> tuple[dict[str, Any], list[Alert]]:
    """The state after one metric row, logged at `step` at `now`, went through the rules; the alerts it fired."""
    new: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in state.items()}
    fired: list[Alert] = []
    told = dict(new.get("alerted") or {})
    _tokens(new, now, metrics)

    def fire(kind: str, metric: str, value: float, said: str, trend: Sequence[float]) -> None:
        rule = alerts.get(kind)
        if rule is None or kind in told:
            return
        told[kind] = step
        fired.append(Alert(kind, metric, step, value, said, tuple(trend), str(rule.get("action", "warn"))))

    bad = [k for k, v in metrics.items() if not math.isfinite(v) and k != NONFINITE]
    if bad or metrics.get(NONFINITE, 0) > 0:
        names = nonfinite_keys or ", ".join(sorted(bad)) or "a metric"
        fire("nan", names, math.nan, f"{names} became NaN or infinite", ())
    # Polyaxon stores TRL's `completions/clipped_ratio` as `completions__clipped_ratio` (a path-safe event name):
    # the rules read TRL's names.
    finite = {k.replace("__", "/"): v for k, v in metrics.items() if math.isfinite(v)}
    if "loss" in finite:
        _divergence(new, finite["loss"], alerts.get("divergence"), fire)
    if evaluation is not None and evaluation.metric in finite:
        _plateau(new, finite[evaluation.metric], evaluation, alerts.get("plateau"), fire)
    for kind, metric, above in (
        ("truncation", "completions/clipped_ratio", True),
        ("collapsed_rewards", "reward_std", False),
    ):
        rule = alerts.get(kind)
        if rule is None or metric not in finite:
            continue
        trend = _series(new, metric, finite[metric])
        level = float(rule["threshold"])
        crossed = finite[metric] >= level if above else finite[metric] <= level
        if _streak(new, kind, crossed) >= int(rule.get("window", 1)):
            words = f"at {finite[metric]:.3g} for {rule['window']} logs ({'≥' if above else '≤'} {level:g})"
            fire(kind, metric, finite[metric], words, trend)
    if "kl" in finite and (rule := alerts.get("kl")) is not None:
        trend = _series(new, "kl", finite["kl"])
        if finite["kl"] > float(rule["threshold"]):
            fire("kl", "kl", finite["kl"], f"above {float(rule['threshold']):g}", trend)
    _throughput(new, alerts.get("throughput"), fire)
    new["alerted"] = told
    return new, fired


def _divergence(state: dict[str, Any], loss: float, rule: Mapping[str, Any] | None, fire: Any) -> None:
    ema = loss if "ema" not in state else EMA * loss + (1 - EMA) * float(state["ema"])
    state["ema"], state["logs"] = ema, int(state.get("logs", 0)) + 1
    trend = _series(state, "loss", loss)
    if rule is None:
        return
    if state["logs"] <= int(rule.get("window", 0)):
        state["best_ema"] = min(ema, float(state.get("best_ema", ema)))
        state["warm_ema"] = ema  # where it stood as warmup ended
        return
    best = min(ema, float(state.get("best_ema", ema)))
    state["best_ema"] = best
    factor = float(rule["threshold"])
    # Above k × its best, and above where it stood after warmup: a loss that converges towards 0 (DPO's) and
    # wobbles there is many times its best and still far below where it started.
    if best > 0 and ema > factor * best and ema > float(state.get("warm_ema", ema)):
        fire("divergence", "loss", loss, f"smoothed {ema:.4g}, above {factor:g} × its best {best:.4g}", trend)


def _plateau(state: dict[str, Any], value: float, evaluation: Eval, rule: Mapping[str, Any] | None, fire: Any) -> None:
    if state.get("last_eval") == value:  # the same evaluation seen again (its listing changed for another reason)
        return
    state["last_eval"] = value
    trend = _series(state, evaluation.metric, value)
    best = state.get("best_eval")
    better = best is None or (value > best if evaluation.higher_is_better else value < best)
    # A metric at its limit (an accuracy of 1, a loss of 0) cannot get better: that is no plateau.
    at_limit = best is not None and (best >= 1.0 if evaluation.higher_is_better else best <= 0.0)
    if better or at_limit:
        state["best_eval"], state["since_best"] = value, 0
        return
    state["since_best"] = int(state.get("since_best", 0)) + 1
    if rule is not None and state["since_best"] >= int(rule.get("window", 3)):
        words = f"not better than its best {best:.4g} for {state['since_best']} evaluations"
        fire("plateau", evaluation.metric, value, words, trend)


def _tokens(state: dict[str, Any], now: datetime, metrics: Mapping[str, float]) -> None:
    """Tokens/s between two rows that counted tokens (TRL's `num_tokens`)."""
    stamp = now.timestamp()
    tokens = metrics.get("num_tokens")
    last = state.get("tokens")
    if tokens is not None and math.isfinite(tokens):
        if last is not None and tokens > last["n"] and stamp > last["t"]:
            state["tps"] = [*state.get("tps", []), (tokens - last["n"]) / (stamp - last["t"])][-HISTORY:]
        state["tokens"] = {"n": tokens, "t": stamp}


def _throughput(state: dict[str, Any], rule: Mapping[str, Any] | None, fire: Any) -> None:
    rates = [float(r) for r in state.get("tps", [])]
    if rule is None or len(rates) < MIN_RATES or state.get("tps_seen") == len(rates):
        return
    state["tps_seen"] = len(rates)
    median = statistics.median(rates[:-1])
    level = float(rule["threshold"]) * median
    if _streak(state, "throughput", rates[-1] < level) >= int(rule.get("window", 3)):
        fire("throughput", "tokens/s", rates[-1], f"under {rule['threshold']:g} × its median {median:,.0f}", rates)


@dataclass(frozen=True)
class Pace:
    """How fast a running run goes: its step rate since its last (re)start, tokens/s, and the time left."""

    steps_per_s: float | None
    tokens_per_s: float | None
    eta_s: float | None


def pace(state: Mapping[str, Any], *, total: int | None) -> Pace:
    """The pace the state measured (None where it has too little to say)."""
    base, step, stamp = state.get("since"), state.get("step"), state.get("t")
    rate = None
    if base is not None and step is not None and stamp is not None and stamp > base["t"] and step > base["step"]:
        rate = (step - base["step"]) / (stamp - base["t"])
    tps = state.get("tps") or []
    eta = (total - step) / rate if rate and total and step is not None and total >= step else None
    return Pace(rate, float(tps[-1]) if tps else None, eta)
