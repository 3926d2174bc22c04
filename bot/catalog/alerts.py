"""A recipe's training-health alerts: which ones a run watches, their thresholds and windows, and what a firing one
does (tell the thread, or stop the run). Pure.

Recipe field `alerts:` maps an alert to `warn`, `stop` or `off`, or to `{action, threshold, window}`:

    alerts:
      nan: stop                          # a loss, gradient norm or eval metric that is NaN or infinite
      divergence: {threshold: 4}         # smoothed training loss above 4 × its best after warmup
      plateau: {window: 5}               # the ranking metric not better than its best for 5 evaluations

Every alert has a default per trainer (`DEFAULTS`); what the recipe names is laid over it. A run stores what it
was planned with (its policy's `alerts`), so a catalog changed while it runs does not change how it is watched.
No alert stops a run unless the recipe says `stop` for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from bot.catalog.manifests import Component

Action = Literal["warn", "stop", "off"]
CUSTOM = "custom"  # a component of the team's own that runs no TRL trainer
KINDS = ("nan", "divergence", "plateau", "truncation", "collapsed_rewards", "kl", "throughput")
# The trainers each alert applies to (None: every trainer).
APPLIES: Mapping[str, frozenset[str] | None] = {
    "nan": None,
    # GRPO's and RLOO's loss is a policy-gradient surrogate near 0 either side: its scale says nothing of divergence.
    "divergence": frozenset({"sft", "dpo", "kto", "reward", "custom"}),
    "plateau": None,
    "truncation": frozenset({"grpo", "rloo"}),
    "collapsed_rewards": frozenset({"grpo", "rloo"}),
    "kl": frozenset({"dpo", "grpo", "rloo"}),
    "throughput": None,
}
# threshold / window: what each means is in bot.health.rules (a factor, a level, a count of logs or evaluations).
DEFAULTS: Mapping[str, dict[str, float]] = {
    "nan": {},
    "divergence": {"threshold": 3.0, "window": 5},  # × best smoothed loss; after `window` logs (warmup)
    "plateau": {"window": 3},  # evaluations without a better ranking metric
    "truncation": {"threshold": 0.999, "window": 3},  # clipped-completion ratio, for `window` logs
    "collapsed_rewards": {"threshold": 1e-6, "window": 3},  # reward std within groups, for `window` logs
    "kl": {"threshold": 10.0},  # the policy's KL to its reference
    "throughput": {"threshold": 0.5, "window": 5},  # tokens/s under half the run's median, for `window` logs
}


class AlertRule(BaseModel):
    """One alert as a recipe sets it: what it does and, where it has them, its threshold and window."""

    model_config = ConfigDict(extra="forbid")

    action: Action = "warn"
    threshold: float | None = Field(default=None, gt=0)
    window: int | None = Field(default=None, ge=1, le=1000)


class AlertsSpec(BaseModel):
    """The recipe's `alerts:` section: each alert by name (`nan: stop` is short for `nan: {action: stop}`)."""

    model_config = ConfigDict(extra="forbid")

    nan: AlertRule | None = None
    divergence: AlertRule | None = None
    plateau: AlertRule | None = None
    truncation: AlertRule | None = None
    collapsed_rewards: AlertRule | None = None
    kl: AlertRule | None = None
    throughput: AlertRule | None = None

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: _short(value) for key, value in data.items()}
        return data


def _short(value: Any) -> Any:
    """`stop` for `{action: stop}`; YAML reads a bare `off` as false (and `on` as true): off and warn."""
    if isinstance(value, bool):
        return {"action": "warn" if value else "off"}
    return {"action": value} if isinstance(value, str) else value


def trainer_alerts(trainer: str, spec: AlertsSpec | None) -> dict[str, dict[str, Any]]:
    """What a run of `trainer` watches: every alert that applies to it, the recipe's settings over the defaults,
    `off` ones left out. Stored in the run's policy as `alerts`."""
    watched: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        applies = APPLIES[kind]
        if applies is not None and trainer not in applies:
            continue
        rule = getattr(spec, kind, None) if spec is not None else None
        settings: dict[str, Any] = {"action": "warn", **DEFAULTS[kind]}
        if rule is not None:
            settings["action"] = rule.action
            settings.update({k: v for k, v in (("threshold", rule.threshold), ("window", rule.window)) if v})
        if settings["action"] != "off":
            watched[kind] = settings
    return watched


def not_applying(trainer: str, spec: AlertsSpec | None) -> list[str]:
    """Alerts the recipe sets that its trainer never logs the metrics for (`manifests check` names them)."""
    if spec is None:
        return []
    return [
        f"{kind} (only for {', '.join(sorted(applies))})"
        for kind in KINDS
        if getattr(spec, kind) is not None and (applies := APPLIES[kind]) is not None and trainer not in applies
    ]


def health_policy(component: Component, spec: AlertsSpec | None) -> dict[str, Any]:
    """The run's policy entries for its health (`alerts`, and the `trainer` they were chosen for): a component that
    runs no TRL trainer (a quick start's own script) gets the alerts every trainer has."""
    from bot.catalog.trainers import component_trainer  # it imports the manifests, which import this module

    kind = component_trainer(component)
    trainer = kind.name if kind is not None else CUSTOM
    return {"alerts": trainer_alerts(trainer, spec), "trainer": trainer}
