"""RunForm: the `run` command as a modal — opened by `/finetune run`, App Home's "New run" and the "Rerun with
changes" shortcut; live as a recipe is chosen; previewed in place; checked field by field on submit.

A submission that passes is started exactly as the typed command: the same parser reads the text the form
stands for, the same run service starts it, and the delivery key is the view's id, so submitting one form
twice starts one run. Nothing in a returned form is used before bot.forms.admit has checked it: its sealed
context, that the person acting opened it, and that its channel is one the bot posts in and the person is in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.catalog import Catalog, Plan
from bot.forms.admit import FormAdmission, FormRefused
from bot.forms.fields import (
    CHANNEL_BLOCK,
    RECIPE_BLOCK,
    Checked,
    Entered,
    FormContext,
    Prefill,
    check_entered,
    error_block,
    presets_block,
    read_entered,
)
from bot.forms.render import field_labels, render_form, render_preview
from bot.forms.seal import FormSeal
from bot.grammar import CommandError, RunCommand, parse_command
from bot.runs import Reply
from bot.runs.submit import memory_refusal
from bot.slack.blocks import escape, section
from bot.slack.channels import ChannelMembers
from bot.slack.places import PostablePlaces
from bot.slack.views import MAX_ERROR, ViewError, message_modal, open_modal, push_modal, update_modal
from storage import repos

Submit = Callable[..., Reply]

if TYPE_CHECKING:
    from bot.runs import RunService
    from bot.usage import UsageService
    from storage.db import SessionFactory

log = logging.getLogger(__name__)

NOT_A_CARD = (
    "*Rerun with changes* works on a run's card: the message the bot posted when the run started. "
    "Choose it from the `⋮` menu of a card."
)


def form_delivery_key(view: dict[str, Any]) -> str:
    """One form, one run: however often it is submitted, its runs are named after the view."""
    return f"view:{view.get('root_view_id') or view.get('id')}"


@dataclass(frozen=True)
class Review:
    """A submission checked before its ack: the errors by block id (none: it may start), the verified channel and
    what the audit says of a refusal."""

    errors: dict[str, str]
    channel: str | None = None
    detail: str = ""


class RunForm:
    """Opens, updates, previews and submits the run form."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        client: WebClient,
        sessions: SessionFactory,
        runs: RunService | None,
        submit: Submit | None = None,
        usage: UsageService | None = None,
        seal: FormSeal | None = None,
        places: PostablePlaces | None = None,
        members: ChannelMembers | None = None,
    ) -> None:
        self.catalog = catalog
        self.client = client
        self.sessions = sessions
        self.runs = runs
        # How a checked form starts its run: the registry's `submit_run` (holds for budgets, preflight skips),
        # else the run service's own.
        self.submit = submit or (runs.submit if runs is not None else None)
        self.usage = usage
        # The composition root passes the seal derived from the bot's secret (every replica reads every form); a
        # bot built without one seals with a key of its own process.
        self.seal = seal or FormSeal.random()
        self.admission = FormAdmission(
            seal=self.seal, client=client, places=places or PostablePlaces(), members=members or ChannelMembers()
        )

    # --- opening ----------------------------------------------------------------------------------

    def open(
        self, trigger_id: str, *, user: str, channel: str | None, origin: str, prefill: Prefill | None = None
    ) -> None:
        """Open the form for `user`, who alone may submit it (ViewError when Slack refuses, e.g. a trigger expired)."""
        ctx = FormContext(channel=channel, origin=origin, opener=user)
        open_modal(self.client, trigger_id, render_form(self.catalog, ctx, prefill or Prefill(), self.seal))

    def open_rerun(self, trigger_id: str, *, user: str, channel: str, message_ts: str) -> None:
        """The shortcut on a message: the form prefilled with the run whose card it is, or why not."""
        with self.sessions() as s:
            run = repos.newest_attempt_on_card(s, channel=channel, card_ts=message_ts)
        if run is None or run.recipe_name not in self.catalog.recipes:
            reason = NOT_A_CARD if run is None else f"Recipe `{run.recipe_name}` is no longer in the catalog."
            open_modal(self.client, trigger_id, message_modal("Rerun with changes", [section(reason)]))
            return
        prefill = Prefill(recipe=run.recipe_name, presets=tuple(run.presets), overrides=dict(run.overrides))
        ctx = FormContext(channel=channel, origin="rerun", rerun_of=run.name, opener=user)
        open_modal(self.client, trigger_id, render_form(self.catalog, ctx, prefill, self.seal))

    # --- while it is open ---------------------------------------------------------------------------

    def recipe_chosen(self, view: dict[str, Any], *, user: str) -> None:
        """A recipe was picked: show its presets and keys (unless the view changed meanwhile: its hash)."""
        try:
            # Re-sealed below: only the context the bot wrote, for its opener, is carried on.
            ctx = self.admission.context(view, user=user)
        except FormRefused:
            return
        entered = read_entered(view, ctx)
        form = render_form(self.catalog, ctx, Prefill(recipe=entered.recipe), self.seal)
        try:
            update_modal(self.client, str(view["id"]), form, hash_=view.get("hash"))
        except ViewError as exc:
            if exc.error != "hash_conflict":
                raise
            # The person changed the form again meanwhile: that change's own action renders it.
            log.info("run form %s changed while it was updated; left to the newer action", view.get("id"))

    def preview(self, view: dict[str, Any], trigger_id: str, *, user: str) -> None:
        """Push the preview: the compiled plan, pins, memory estimate and the gate's verdict, or what to fix."""
        try:
            ctx = self.admission.context(view, user=user)
        except FormRefused as refused:
            push_modal(self.client, trigger_id, message_modal("Preview", [section(refused.message)]))
            return
        entered = read_entered(view, ctx)
        checked, plan = self.check(entered, user=user)
        labels = field_labels(self.catalog, entered.recipe)
        guess = self.usage.estimate(plan) if self.usage is not None and plan is not None else None
        view_ = render_preview(plan, checked.errors, labels, estimate=guess.line() if guess else None)
        push_modal(self.client, trigger_id, view_)

    # --- submitting ---------------------------------------------------------------------------------

    def review(self, view: dict[str, Any], *, user: str) -> Review:
        """The submission checked before its ack: its seal and opener, every field, then its channel.

        A refusal of the form itself (not the bot's, or someone else's) is shown under the recipe, the one field
        every form has; a channel the run may not go to, under the channel field when the form asked for one.
        """
        try:
            ctx = self.admission.context(view, user=user)
        except FormRefused as refused:
            return Review({RECIPE_BLOCK: refused.message[:MAX_ERROR]}, detail=refused.detail)
        entered = read_entered(view, ctx)
        checked, _ = self.check(entered, user=user)
        errors = dict(checked.errors)
        channel_block = CHANNEL_BLOCK if ctx.channel is None else RECIPE_BLOCK
        if entered.channel is not None and channel_block not in errors:
            problem = self.admission.channel_problem(entered.channel, user=user)
            if problem:
                errors[channel_block] = problem
        trusted = entered.channel if CHANNEL_BLOCK not in errors else None
        detail = "fields: " + ", ".join(sorted(errors))
        return Review({block: message[:MAX_ERROR] for block, message in errors.items()}, trusted, detail)

    def refused(self, review: Review, *, user: str) -> None:
        """Audit a submission answered with errors: who, where, which fields (never the values entered)."""
        with self.sessions() as s:
            repos.add_audit(
                s,
                user=user,
                channel=review.channel,
                command="/finetune run (form)",
                outcome="refused",
                detail=review.detail,
            )

    def check(self, entered: Entered, *, user: str) -> tuple[Checked, Plan | None]:
        """Fields first, then the whole command as the parser, the catalog and the gates read it."""
        needs_channel = entered.context.channel is None
        checked = check_entered(self.catalog, entered, needs_channel=needs_channel)
        if checked.text is None:
            return checked, None
        try:
            command = parse_command(checked.text)
            assert isinstance(command, RunCommand)
            if self.runs is not None:
                plan, verdict = self.runs.vet(command, user=user)
            else:
                plan, verdict = self.catalog.plan(command), None
        except CommandError as exc:  # PlanError included
            block = error_block(exc.message, entered)
            return Checked(None, {**checked.errors, block: exc.message}), None
        errors = dict(checked.errors)
        if plan.over_memory_budget:
            errors[presets_block(plan.recipe)] = memory_refusal(plan)
        if verdict is not None and not verdict.allowed:
            errors[RECIPE_BLOCK] = verdict.refusal or "the preflight gate refuses this run"
        return Checked(checked.text if not errors else None, errors), plan

    def start(self, view: dict[str, Any], *, user: str) -> None:
        """After the ack closed the form: start the run as the command would, and tell the person (ephemeral)."""
        # The whole form was checked before the ack; a delivery carried out again (after a crash, by another
        # replica) was not, so the form and its channel are admitted again (cheap: the answers are cached). What
        # changed since (a preflight, a budget) the submission's own gates refuse below, as for a typed command.
        try:
            ctx = self.admission.context(view, user=user)
        except FormRefused as refused:
            self._tell_directly(user, refused.message)
            return
        entered = read_entered(view, ctx)
        channel = entered.channel
        checked = check_entered(self.catalog, entered, needs_channel=ctx.channel is None)
        if channel is None or checked.text is None:
            log.error("run form %s submitted without a channel or recipe after its check", view.get("id"))
            return
        problem = self.admission.channel_problem(channel, user=user)
        if problem is not None:
            self._tell_directly(user, f":no_entry: {problem}")
            return
        if self.runs is None:
            self._tell(channel, user, "Runs need Polyaxon, which this bot was started without (POLYAXON_HOST).")
            return
        command = parse_command(checked.text)
        assert isinstance(command, RunCommand)
        assert self.submit is not None
        try:
            reply = self.submit(command, user=user, channel=channel, delivery_key=form_delivery_key(view))
        except CommandError as exc:
            self._tell(channel, user, f":x: {exc.message if exc.mrkdwn else escape(exc.message)}")
            return
        self._tell(channel, user, f"{reply.text}\nFrom the form: `/finetune {escape(checked.text)}`")

    def _tell_directly(self, user: str, text: str) -> None:
        """A note in the person's direct messages with the bot: for a form whose channel is not to be used."""
        try:
            self.client.chat_postMessage(channel=user, text=text, blocks=[section(text)])
        except SlackApiError as exc:
            log.error("could not tell %s about the run form: %s", user, exc.response.get("error"))

    def _tell(self, channel: str, user: str, text: str) -> None:
        try:
            self.client.chat_postEphemeral(channel=channel, user=user, text=text, blocks=[section(text)])
        except SlackApiError as exc:
            # The run (if any) has its card; only this note is lost, and the log says why.
            log.error("could not tell %s in %s about the run form: %s", user, channel, exc.response.get("error"))
