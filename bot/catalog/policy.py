"""A run's failure policy from its recipe and presets: retries, the start deadline, where failures are told. Pure.

Recipe fields: `retry: {max: N, on: [preempted, node_lost, oom_host, …]}`, `max_pending: 10m` and
`notify: C0123ABCD`; a preset may set `maxPending` (catalog metadata, removed before Polyaxon merges it). The
shortest start deadline wins: the platform team's preset bounds how long a queue may hold its GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

# What a retry may be for: the cluster took the job away, or the host ran out of memory (another node may have
# more), a time limit, a flaky image pull or a cluster with no room at the time. Never the run's own faults: code,
# data, divergence.
RETRYABLE = ("preempted", "node_lost", "oom_host", "timeout", "image", "unschedulable")
NEVER_RETRIED = ("code", "data", "nan", "dependency", "oom_cuda", "unknown")

# The run's `notify=` (thread, dm or both), stored in its policy by the run service: how its requester hears that
# it ended or needs them (bot.notify). Not the recipe's: `notify` above is the channel final failures go to.
NOTIFY_REQUESTER = "notify_requester"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT_S = {None: 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(value: Any) -> float:
    """Seconds of `90`, `90s`, `10m`, `2h` or `1d`; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a duration: write 90s, 10m, 2h or 1d")
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"{value!r}: a duration must be positive")
    return seconds


class RetrySpec(BaseModel):
    """`retry:` of a recipe: how many more attempts, and for which failure classes."""

    model_config = {"extra": "forbid", "frozen": True}

    max: int = Field(ge=1, le=10, description="Attempts after the first")
    on: list[str] = Field(min_length=1, description="Failure classes that are retried")

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        # YAML 1.1 (PyYAML) reads a bare `on:` key as the boolean True: `retry: {max: 2, on: [...]}` means "on".
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if key is True else key): value for key, value in data.items()}
        return data

    @field_validator("on")
    @classmethod
    def _classes(cls, v: list[str]) -> list[str]:
        for kind in v:
            if kind in NEVER_RETRIED:
                raise ValueError(
                    f"{kind} is never retried: a retry would fail the same way (retry only {', '.join(RETRYABLE)})"
                )
            if kind not in RETRYABLE:
                raise ValueError(f"{kind!r} is not a failure class that can be retried: {', '.join(RETRYABLE)}")
        return sorted(set(v), key=v.index)


def attempts_allowed(policy: Mapping[str, Any] | None) -> int:
    """How many attempts a run's stored policy allows in all (1 without `retry:`)."""
    retry = (policy or {}).get("retry") or {}
    return 1 + int(retry.get("max") or 0)


def run_policy(
    *, retry: RetrySpec | None, max_pending: Any, notify: str | None, preset_max_pending: Sequence[tuple[str, Any]]
) -> dict[str, Any]:
    """What the run stores as its policy: the retry budget, the start deadline (and who set it), the channel."""
    policy: dict[str, Any] = {}
    if retry is not None:
        policy["retry"] = {"max": retry.max, "on": list(retry.on)}
    deadlines = [(duration_s(value), f"preset {name}") for name, value in preset_max_pending]
    if max_pending is not None:
        deadlines.append((duration_s(max_pending), "recipe"))
    if deadlines:
        seconds, origin = min(deadlines)
        policy["max_pending_s"] = seconds
        policy["max_pending_from"] = origin
    if notify:
        policy["notify"] = notify
    return policy
