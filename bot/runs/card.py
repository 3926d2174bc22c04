"""The status card: one message per run in the channel, edited in place. Pure rendering."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from bot.catalog.policy import attempts_allowed
from bot.grammar import scalar_text
from bot.health.render import badge, pace_text
from bot.health.rules import pace
from bot.runs.card_durations import durations_line
from bot.runs.kinds import SHOWN, RunKind, Verb, applies, kind_of
from bot.settings import PolyaxonSettings
from bot.slack.blocks import ButtonAction, command_button, context, escape, header, mention, section
from storage.models import Run

STATUS_EMOJI = {
    "submitting": ":hourglass_flowing_sand:",
    "awaiting_approval": ":raised_hand:",
    "pending_submit": ":hourglass:",
    "submit_failed": ":no_entry:",
    "created": ":new:",
    "compiled": ":new:",
    "queued": ":inbox_tray:",
    "scheduled": ":inbox_tray:",
    "starting": ":arrow_forward:",
    "running": ":runner:",
    "processing": ":runner:",
    "stopping": ":octagonal_sign:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "stopped": ":octagonal_sign:",
    "lost": ":ghost:",
    "upstream_failed": ":x:",
    "skipped": ":fast_forward:",
    "warning": ":warning:",
    "unschedulable": ":warning:",
    "retrying": ":repeat:",
}
# The service row (`service_outages`) whose outage an active run's card tells (bot.watch.outage records it).
OUTAGE_SERVICE = "polyaxon"
CARD_METRICS = ("loss", "eval_loss", "learning_rate", "grad_norm", "eval_perplexity")


class CardView(BaseModel):
    """Everything the card shows about a run."""

    name: str
    uuid: str | None = None
    recipe: str
    recipe_hash: str = ""
    catalog_revision: str | None = None  # the catalog it was planned from
    presets: list[str] = Field(default_factory=list)
    # The presets the recipe gives by default: the card marks the others as the requester's choice.
    recipe_presets: list[str] | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    pins: dict[str, Any] = Field(default_factory=dict)
    comparable: bool = True
    requester: str
    status: str
    step: int | None = None
    max_steps: int | None = None
    # What `step` counts: "step" (trainer steps), or "epoch" for a recipe that trains by epochs (the quick
    # starts log one metric step per finished epoch, 1-based) and has no max_steps.
    step_unit: str = "step"
    checkpoint_step: int | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    contract_metrics: list[str] = Field(default_factory=list)  # the eval contract's metrics, shown too
    polyaxon_url: str | None = None
    parent_name: str | None = None
    parent_link: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    note: str | None = None
    # The run's kind (bot.runs.kinds): a preflight's card says so; the kinds table decides which buttons it gets.
    kind: str = "train"
    # `/finetune outputs` read the outputs back: confirmed, or what did not check out.
    confirmed: bool = False
    outputs_problems: list[str] = Field(default_factory=list)
    # How a distributed run passed the smoke-first gate: {"state": "validated", "preflight": …} or unvalidated.
    validation: dict[str, Any] | None = None
    # When runs go wrong (bot.failures): the attempt of a retried run, the previous attempt's failure, this
    # run's failure (title, evidence, hint), the condition it waits on, how long it waited and ran.
    attempt: int = 1
    attempts: int = 1
    previous_failure: str | None = None
    failure: dict[str, Any] | None = None
    condition: str | None = None
    durations: str | None = None
    # While Polyaxon does not answer (told once it lasted a while): the card says its state may be behind.
    outage: str | None = None
    # Training health (bot.health): the alerts that fired, and a running run's pace (` · 30 % · ETA 4 min`).
    alerts: list[str] = Field(default_factory=list)
    pace: str = ""


def card_view(
    run: Run,
    *,
    polyaxon_url: str | None,
    parent_name: str | None = None,
    parent_link: str | None = None,
    recipe_presets: list[str] | None = None,
    previous_failure: str | None = None,
    now: datetime | None = None,
    outage: str | None = None,
) -> CardView:
    """The card's content for a stored run (its parent, when resumed, found by the caller)."""
    metrics = {k: float(v) for k, v in run.last_metrics.items() if isinstance(v, int | float)}
    max_steps, step_unit = progress_total(run.params)
    return CardView(
        name=run.name,
        uuid=run.polyaxon_uuid,
        recipe=run.recipe_name,
        recipe_hash=run.recipe_hash,
        catalog_revision=run.catalog_revision,
        presets=run.presets,
        recipe_presets=list(recipe_presets) if recipe_presets is not None else None,
        overrides=dict(run.overrides),
        pins={k: v for k, v in run.pins.items() if k in {"model", "dataset", "image", "code", "base"}},
        comparable=run.comparable,
        requester=run.requester,
        status=run.status,
        step=run.last_step,
        checkpoint_step=run.checkpoint_step,
        max_steps=max_steps,
        step_unit=step_unit,
        metrics=metrics,
        contract_metrics=[str(m) for m in (run.eval_contract or {}).get("metrics") or []],
        polyaxon_url=polyaxon_url,
        parent_name=parent_name,
        parent_link=parent_link,
        started_at=run.started_at,
        finished_at=run.finished_at,
        kind=kind_of(run).value,
        confirmed=run.outputs_confirmed_at is not None,
        outputs_problems=list((run.outputs_check or {}).get("problems") or []),
        validation=run.validation,
        attempt=run.attempt,
        attempts=attempts_allowed(run.policy),
        previous_failure=previous_failure,
        failure=run.failure,
        condition=run.condition if run.started_at is None else None,
        durations=durations_line(run, now) if now is not None else None,
        outage=outage,
        alerts=list(((run.health or {}).get("alerted") or {}).keys()),
        pace=(
            pace_text(run.last_step, max_steps, pace(run.health or {}, total=max_steps))
            if run.status in {"running", "processing"}
            else ""
        ),
    )


def outage_line(host: str, since: datetime) -> str:
    """The line an active run's card shows while Polyaxon does not answer."""
    return (
        f":warning: Polyaxon at `{escape(host)}` has not answered since {since:%H:%M} UTC: this card shows the "
        "last state the bot saw; the bot keeps asking, and the card catches up when Polyaxon answers."
    )


def polyaxon_url(settings: PolyaxonSettings, run: Run) -> str | None:
    """The run's page in Polyaxon's UI."""
    if not settings.host or not run.polyaxon_uuid:
        return None
    return f"{settings.host}/ui/{settings.owner}/{settings.project}/runs/{run.polyaxon_uuid}"


def progress_total(params: dict[str, Any]) -> tuple[int | None, str]:
    """What the run's progress counts to, and in what: `max_steps` steps, else `epochs` epochs."""
    for key, unit in (("max_steps", "step"), ("epochs", "epoch")):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, unit
    return None, "step"


def _progress(step: int | None, max_steps: int | None, unit: str = "step") -> str:
    if step is None:
        return ""
    if not max_steps or max_steps <= 0:
        return f"{unit} {step}"
    done = max(0, min(10, round(10 * step / max_steps)))
    return f"{unit} {step}/{max_steps} `{'█' * done}{'░' * (10 - done)}`"


def progress_summary(view: CardView) -> str:
    """` · step 20/20 · eval_loss 1.538`: the card's progress and its first figure (the eval contract's metrics
    first, then the training ones), for a list of runs: the same source as the card."""
    parts = []
    if view.step is not None:
        parts.append(f"{view.step_unit} {view.step}" + (f"/{view.max_steps}" if view.max_steps else ""))
    for key in (*view.contract_metrics, "eval_loss", *CARD_METRICS):
        if key in view.metrics:
            parts.append(f"{escape(key)} {view.metrics[key]:.4g}")
            break
    return "".join(f" · {part}" for part in parts)


def render_card(view: CardView) -> list[dict[str, Any]]:
    """Blocks of the run's status card, with buttons that carry commands back through the parser."""
    emoji = STATUS_EMOJI.get(view.status, ":grey_question:")
    title = f"preflight · {view.recipe}" if view.kind == "preflight" else view.recipe
    blocks: list[dict[str, Any]] = [header(f"{title} · {view.name}")]
    # Marked only where the recipe's defaults are known: a card of a recipe the catalog lost marks nothing.
    known = view.recipe_presets is not None
    chosen = [
        f"`{escape(p)}`" + (" (chosen)" if known and p not in (view.recipe_presets or []) else "") for p in view.presets
    ]
    presets = ", ".join(chosen) or "none"
    status_line = f"{emoji} *{escape(view.status)}*"
    progress = _progress(view.step, view.max_steps, view.step_unit)
    if progress:
        status_line += f" · {progress}{view.pace}"
    if view.attempts > 1:
        status_line += f" · attempt {view.attempt}/{view.attempts}"
    lines = [status_line, f"*Requested by* {mention(view.requester)} · *Presets* {presets}"]
    if view.outage:
        lines.insert(1, view.outage)
    if view.alerts:
        lines.insert(1, badge(view.alerts))
    if view.durations:
        lines.append(f":stopwatch: {view.durations}")
    if view.overrides:
        overrides = " ".join(f"`{escape(k)}={escape(scalar_text(v))}`" for k, v in sorted(view.overrides.items()))
        lines.append(f"*Overrides* {overrides}")
    else:
        lines.append("*Overrides* none (the recipe's defaults)")
    shown = SHOWN[RunKind(view.kind)]  # what the card says comes from the kind, not from fields it shares
    if not view.comparable and shown.trains:
        lines.append(":warning: *non-comparable*: not fully pinned (exploration)")
    if view.parent_name and shown.link:
        name = escape(view.parent_name)
        parent = f"<{view.parent_link}|{name}>" if view.parent_link else f"`{name}`"
        lines.append(f"{shown.link} {parent}")
    lines += _failure_lines(view)
    lines += _gate_lines(view)
    if view.note:
        lines.append(escape(view.note))
    blocks.append(section("\n".join(lines)))
    # The fixed training metrics, and whatever the run's eval contract measures (a quick start's accuracy).
    figures = {k: v for k, v in view.metrics.items() if k in CARD_METRICS or k in view.contract_metrics}
    if figures:
        latest = " · ".join(f"{escape(k)} `{v:.4g}`" for k, v in sorted(figures.items()))
        blocks.append(section(f"*Latest metrics* {latest}"))
    pins = " · ".join(f"{escape(k)} `{escape(short_pin(str(v)))}`" for k, v in sorted(view.pins.items()))
    ctx = [f"run `{escape(view.uuid[:8])}`" if view.uuid else "not submitted yet"]
    if view.polyaxon_url and view.status != "lost":  # a lost run's page in Polyaxon is gone
        ctx.append(f"<{view.polyaxon_url}|open in Polyaxon>")
    if pins:
        ctx.append(f"pins: {pins}")
    if view.catalog_revision:
        ctx.append(f"catalog `{escape(view.catalog_revision)}`")
    blocks.append(context(*ctx))
    blocks.append({"type": "actions", "elements": card_buttons(view)})
    return blocks


def card_buttons(view: CardView) -> list[dict[str, Any]]:
    """The buttons for the run's state, each only where the kinds table says its command applies to the kind."""
    kind, ref = RunKind(view.kind), view.name
    ended = view.status in TERMINAL_CARD_STATUSES
    offered = [
        (Verb.LOGS, True, command_button("Logs", ButtonAction.LOGS, ref, suffix="logs")),
        (Verb.COMPARE, True, command_button("Compare", ButtonAction.COMPARE, ref, suffix="compare")),
        (Verb.STOP, not ended, command_button("Stop", ButtonAction.STOP, ref, suffix="stop", style="danger")),
        (
            Verb.OUTPUTS,
            ended and view.status not in {"submit_failed", "lost"},
            command_button("Outputs", ButtonAction.OUTPUTS, ref, suffix="outputs"),
        ),
        (
            Verb.REGISTER,
            view.status == "succeeded",
            command_button("Request registration", ButtonAction.REGISTER, ref, suffix="register", style="primary"),
        ),
        (
            Verb.RESUME,
            view.status in {"failed", "stopped"} and view.checkpoint_step is not None,
            command_button("Resume", ButtonAction.RESUME, ref, suffix="resume"),
        ),
    ]
    return [button for verb, when, button in offered if when and applies(kind, verb)]


def _failure_lines(view: CardView) -> list[str]:
    """Why it waits, why the previous attempt failed, why this one did (class, evidence, hint)."""
    lines = []
    if view.condition and view.status not in TERMINAL_CARD_STATUSES:
        lines.append(f":hourglass: *Waiting*: {escape(view.condition.strip(': '))}")
    if view.previous_failure:
        lines.append(f":repeat: attempt {view.attempt - 1} ended: {escape(view.previous_failure)}")
    if view.status == "lost":
        lines.append(
            ":ghost: *Lost*: Polyaxon no longer has this run (deleted there, or the server was replaced); "
            "the card shows what the bot saw last"
        )
    failure = view.failure or {}
    if failure and view.status in TERMINAL_CARD_STATUSES:
        lines.append(f":x: *{escape(str(failure.get('title')))}*: `{escape(str(failure.get('evidence')))}`")
        lines.append(f":bulb: {escape(str(failure.get('hint')))}")
        if failure.get("retry") == "started":
            lines.append(f":repeat: {escape(str(failure.get('why')))}")
    return lines


TERMINAL_CARD_STATUSES = frozenset({"succeeded", "failed", "stopped", "submit_failed", "lost"})


def _gate_lines(view: CardView) -> list[str]:
    """What the card says about the smoke-first gate and the read-back of the outputs."""
    lines = []
    if view.kind == "preflight":
        lines.append(":mag: *Preflight* of a distributed recipe: its report goes in this thread")
    state = (view.validation or {}).get("state")
    if state == "validated" and view.validation is not None:
        lines.append(f":shield: *Validated* by preflight `{escape(str(view.validation.get('preflight')))}`")
    elif state == "awaiting_approval":
        who = (view.validation or {}).get("requested_by")
        lines.append(
            f":raised_hand: *Held*: {mention(str(who))} asked to skip the preflight; "
            "approvers decide on the request in its thread"
        )
    elif state == "unvalidated":
        validation = view.validation or {}
        approvers = ", ".join(mention(a) for a in validation.get("approved_by") or []) or "nobody"
        skipped_by = mention(str(validation.get("skipped_by")))
        lines.append(f":warning: *Unvalidated*: preflight skipped by {skipped_by}, approved by {approvers}")
    if view.confirmed:
        lines.append(":white_check_mark: *Outputs confirmed*: read back from Polyaxon and checked")
    elif view.outputs_problems:
        lines.append(f":warning: *Outputs not confirmed*: {escape(view.outputs_problems[0])}")
    return lines


def card_text(view: CardView) -> str:
    """Notification text of the card (what clients show without blocks)."""
    return escape(f"{view.recipe} {view.name}: {view.status}")


_HEX_RUN = re.compile(r"[0-9a-f]{12,}")


def short_pin(pin: str, keep: int = 12) -> str:
    """A pin by its identifying part: the name's last path part and the digest or revision, cut at the end.

    `ghcr.io/org/trainer@sha256:1a2b…` -> `trainer@sha256:1a2b3c4d5e6f…`; `.finetune/models/tiny@sha256:9f…`
    -> `tiny@sha256:9f…`; `Qwen/Qwen2.5-0.5B@<40-hex>` -> `Qwen2.5-0.5B@<12-hex>…`; a bare commit -> 12 hex.
    """
    name, at, rest = pin.rpartition("@")
    if not at:
        name, rest = "", pin
    base = name.rstrip("/").rsplit("/", 1)[-1]

    def cut(match: re.Match[str]) -> str:
        return match.group(0)[:keep] + ("…" if len(match.group(0)) > keep else "")

    ident = _HEX_RUN.sub(cut, rest)
    return f"{base}@{ident}" if base else ident
