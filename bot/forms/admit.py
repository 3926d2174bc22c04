"""Whether a run form that comes back may be used: its seal, who acts on it, and where its run's card would go.

What the bot handed out comes back untrusted. Before a form's content is read, its private_metadata must carry the
bot's seal (bot.forms.seal) and the person acting must be the one the bot opened it for; before a run is started,
its channel must be a channel id the bot can post in (bot.slack.places, the commands' own check) and one the
person is in (bot.slack.channels). Each refusal is a FormRefused with the words the person sees; nothing was
changed.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient

from bot.forms.fields import NOT_A_CHANNEL, FormContext
from bot.forms.seal import FormSeal, FormTampered
from bot.slack.blocks import escape
from bot.slack.channels import ChannelMembers, is_channel_id
from bot.slack.places import PostablePlaces

log = logging.getLogger(__name__)

TAMPERED = (
    "This form could not be verified: it was changed after the bot opened it, or opened before the bot's keys "
    "changed. Nothing was started: open a new one with `/finetune run`."
)
NOT_YOURS = (
    "This form was opened for someone else, and only they can submit it. Nothing was started: open your own with "
    "`/finetune run`."
)


class FormRefused(Exception):
    """A returned form that may not be used: `message` for the person, `detail` for the audit (no values)."""

    def __init__(self, message: str, *, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class FormAdmission:
    """Checks a returned form against what the bot handed out, and its channel against Slack."""

    def __init__(self, *, seal: FormSeal, client: WebClient, places: PostablePlaces, members: ChannelMembers) -> None:
        self.seal = seal
        self.client = client
        self.places = places
        self.members = members

    def context(self, view: dict[str, Any], *, user: str) -> FormContext:
        """The form's sealed context, when `user` is the person it was opened for; FormRefused otherwise."""
        try:
            ctx = self.seal.open(view.get("private_metadata"))
        except FormTampered as exc:
            log.warning("run form %s refused (user %s): %s", view.get("id"), user, exc)
            raise FormRefused(TAMPERED, detail="form: private_metadata not the bot's") from exc
        if ctx.opener != user:
            log.warning("run form %s opened by %s, acted on by %s: refused", view.get("id"), ctx.opener, user)
            raise FormRefused(NOT_YOURS, detail="form: not its opener")
        return ctx

    def channel_problem(self, channel: str, *, user: str) -> str | None:
        """Why the run's card may not go to `channel` for `user` (None: it may): the bot must be able to post there,
        and the person must be in it."""
        if not is_channel_id(channel):
            return NOT_A_CHANNEL
        why = self.places.refusal(self.client, channel_id=channel, channel_name="")
        if why is not None:
            return (
                f"The bot cannot post its card in <#{escape(channel)}>: {why}. Invite it (`/invite @finetune-bot`) "
                "or choose a channel it is in."
            )
        member = self.members.is_member(self.client, channel=channel, user=user)
        if member is None:
            return (
                f"Slack could not say whether you are in <#{escape(channel)}>. Nothing was started: try again in a "
                "moment."
            )
        if not member:
            return (
                f"You are not in <#{escape(channel)}>: a run's card goes to a channel you are in. Join it, or "
                "choose another."
            )
        return None
