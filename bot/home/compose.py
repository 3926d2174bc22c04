"""The App Home tab of one person: their active runs, the approvals waiting for them, their recent registrations,
and the digests of channels they are in. Pure: data in, a `home` view out."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.forms import OPEN_ACTION
from bot.grammar import NOTIFY_CHOICES, Notify
from bot.notify import NOTIFY_LABELS
from bot.slack.blocks import ButtonAction, command_button, context, divider, escape, header, mention, section
from bot.slack.views import View, button, home

HOME_CALLBACK = "finetune_home"
# The person's default for how they hear that their runs ended or need them (a static select; its value is checked
# again when it comes back: bot.home.service.AppHome.set_notify).
NOTIFY_ACTION = "home_notify"
NOTIFY_BLOCK = "home_notify"
MAX_RUNS = 15
MAX_REQUESTS = 10
# Every active run may be stopped (`stop` cancels one that Polyaxon has not started yet), except one stopping.
NOT_STOPPABLE = frozenset({"stopping"})


@dataclass(frozen=True)
class HomeRun:
    """One of the person's active runs."""

    name: str
    recipe: str
    status: str
    channel: str
    kind: str = "train"
    step: int | None = None
    max_steps: int | None = None
    link: str | None = None


@dataclass(frozen=True)
class HomeRequest:
    """An open approval request: one the person may approve, or one of theirs waiting for approvers."""

    action: str  # register, skip_preflight, promote, …
    subject: str  # `model:version`, a run name
    run_name: str
    channel: str
    requester: str
    approvals: int
    quorum: int
    mine: bool  # True: the person asked; False: the person may approve
    link: str | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True)
class HomeRegistration:
    """A model version registered from the person's run, or at their request."""

    model: str
    version: str
    run_name: str
    registered_at: datetime
    link: str | None = None


@dataclass(frozen=True)
class HomeDigest:
    """A channel digest the person gets (they are in the channel)."""

    channel: str
    schedule: str


@dataclass
class HomeData:
    """What one person's Home tab shows."""

    user: str
    runs: list[HomeRun] = field(default_factory=list)
    requests: list[HomeRequest] = field(default_factory=list)
    registrations: list[HomeRegistration] = field(default_factory=list)
    digests: list[HomeDigest] = field(default_factory=list)
    now: datetime | None = None
    polyaxon: bool = True
    notify: Notify = "thread"


ACTIONS = {
    "register": "Register",
    "skip_preflight": "Skip the preflight of",
    "promote": "Promote",
    "budget": "Go over the budget with",
}


def compose_home(data: HomeData) -> View:
    """The Home tab: a "New run" button, then each list (or a line saying it is empty)."""
    blocks: list[dict[str, Any]] = [
        header("finetune-bot"),
        section(
            "Start a fine-tuning run from a form, or type `/finetune run recipe=NAME …` in a channel. "
            "This tab shows what is yours; it is refreshed each time you open it."
        ),
        {"type": "actions", "block_id": "home_actions", "elements": [button("New run", OPEN_ACTION, style="primary")]},
        _notify_choice(data.notify),
        divider(),
        header(f"Your active runs ({len(data.runs)})"),
    ]
    if not data.polyaxon:
        blocks.append(context("Runs need Polyaxon, which this bot was started without."))
    blocks += _runs(data.runs) or [context("No active runs. Finished runs are in their channels' threads.")]
    blocks += [divider(), header(f"Waiting for you ({sum(1 for r in data.requests if not r.mine)})")]
    blocks += _requests([r for r in data.requests if not r.mine]) or [context("Nothing to approve.")]
    mine = [r for r in data.requests if r.mine]
    if mine:
        blocks.append(section("*Your requests, waiting for approvers*"))
        blocks += _requests(mine)
    blocks += [divider(), header("Your recent registrations")]
    blocks += _registrations(data.registrations) or [context("No model versions registered from your runs yet.")]
    blocks += [divider(), header("Digests in your channels")]
    lines = [f"• <#{escape(d.channel)}>: {escape(d.schedule)}" for d in data.digests]
    blocks.append(section("\n".join(lines)) if lines else context("None of your channels has a digest scheduled."))
    return home(blocks, callback_id=HOME_CALLBACK)


def _notify_choice(current: Notify) -> dict[str, Any]:
    """ "When my runs end or need me": the person's default, shown as chosen; `notify=` on a run overrides it."""

    def option(value: Notify) -> dict[str, Any]:
        return {"text": {"type": "plain_text", "text": NOTIFY_LABELS[value]}, "value": value}

    return {
        "type": "section",
        "block_id": NOTIFY_BLOCK,
        "text": {
            "type": "mrkdwn",
            # The choice in words too: what a screen reader and `finetune-bot local`'s `home` say.
            "text": f"*When my runs end or need me*: {NOTIFY_LABELS[current].lower()}\n"
            "`notify=thread|dm|both` on `/finetune run` chooses for one run.",
        },
        "accessory": {
            "type": "static_select",
            "action_id": NOTIFY_ACTION,
            "placeholder": {"type": "plain_text", "text": "How to tell me"},
            "options": [option(value) for value in NOTIFY_CHOICES],
            "initial_option": option(current),
        },
    }


def _runs(runs: list[HomeRun]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for i, run in enumerate(runs[:MAX_RUNS]):
        step = f" · step {run.step}/{run.max_steps}" if run.step is not None and run.max_steps else ""
        kind = "" if run.kind == "train" else f" ({escape(run.kind)})"
        name = f"<{run.link}|{escape(run.name)}>" if run.link else f"`{escape(run.name)}`"
        where = f"in <#{escape(run.channel)}>"
        blocks.append(section(f"*{name}*{kind} · `{escape(run.recipe)}` · *{escape(run.status)}*{step} · {where}"))
        buttons = [command_button("Status", ButtonAction.STATUS, run.name, suffix=f"home-status-{i}")]
        if run.status not in NOT_STOPPABLE:
            buttons.append(command_button("Stop", ButtonAction.STOP, run.name, suffix=f"home-stop-{i}", style="danger"))
        blocks.append({"type": "actions", "block_id": f"home_run_{i}", "elements": buttons})
    if len(runs) > MAX_RUNS:
        blocks.append(context(f"…and {len(runs) - MAX_RUNS} more: `/finetune status` lists them all."))
    return blocks


def _requests(requests: list[HomeRequest]) -> list[dict[str, Any]]:
    lines = []
    for req in requests[:MAX_REQUESTS]:
        verb = ACTIONS.get(req.action, req.action.replace("_", " ").capitalize())
        where = f"<{req.link}|the request>" if req.link else "the request"
        who = "" if req.mine else f" · asked by {mention(req.requester)}"
        react = "" if req.mine else f" · react on {where} to approve"
        lines.append(
            f"• {verb} `{escape(req.subject)}` (run `{escape(req.run_name)}`) in <#{escape(req.channel)}> · "
            f"{req.approvals}/{req.quorum} approvals{who}{react}"
        )
    if len(requests) > MAX_REQUESTS:
        lines.append(f"…and {len(requests) - MAX_REQUESTS} more in their channels.")
    return [section("\n".join(lines))] if lines else []


def _registrations(registrations: list[HomeRegistration]) -> list[dict[str, Any]]:
    lines = []
    for reg in registrations:
        run = f"<{reg.link}|{escape(reg.run_name)}>" if reg.link else f"`{escape(reg.run_name)}`"
        lines.append(
            f"• `{escape(reg.model)}:{escape(reg.version)}` from {run}, {reg.registered_at:%Y-%m-%d %H:%M} UTC"
        )
    return [section("\n".join(lines))] if lines else []
