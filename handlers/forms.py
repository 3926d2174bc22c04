"""The run form's surfaces: its actions (recipe chosen, preview, "New run" on App Home), its submission, and the
"Rerun with changes" message shortcut.

A submission is checked before the ack, because Slack shows per-field errors only in the answer to it
(`response_action: errors`, within 3 s: the form's seal and opener, then the parser, the catalog and the gates,
~50 ms, then its channel, asked of Slack and cached); a submission that passes is acked (the modal closes) and
started after, like every other delivery. Every action on the form is its opener's only (bot.forms.admit).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import Ack, App

from bot.forms import ACTION_PREFIX, FORM_CALLBACK, OPEN_ACTION, PREVIEW_ACTION, RECIPE_ACTION, RunForm
from bot.services import Services
from bot.slack.views import ViewError

logger = logging.getLogger("finetune_bot.forms")

RERUN_CALLBACK = "finetune_rerun"
ACTION_PATTERN = re.compile(rf"^{re.escape(ACTION_PREFIX)}")


def register(app: App, services: Services) -> None:
    """Register the form's action, submission and shortcut listeners."""
    forms = services.forms
    if forms is None:
        return

    @app.action(ACTION_PATTERN)
    def handle_form_action(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        services.work.submit(body, lambda: handle_form_action_delivery(services, body))

    @app.view(FORM_CALLBACK)
    def handle_form_submission(ack: Ack, body: dict[str, Any]) -> None:
        review = forms.review(body["view"], user=_user(body))
        if review.errors:
            ack(response_action="errors", errors=review.errors)
            forms.refused(review, user=_user(body))
            services.work.nothing_more(body)
            return
        ack()
        services.work.submit(body, lambda: handle_submission_delivery(services, body))

    @app.shortcut(RERUN_CALLBACK)
    def handle_rerun_shortcut(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        services.work.submit(body, lambda: handle_shortcut_delivery(services, body))


def _user(body: dict[str, Any]) -> str:
    return str((body.get("user") or {}).get("id") or "")


def _forms(services: Services) -> RunForm:
    assert services.forms is not None, "form deliveries are only taken when the form is built"
    return services.forms


def handle_form_action_delivery(services: Services, body: dict[str, Any]) -> None:
    """A recipe chosen (the form shows its fields), Preview (pushed over the form), or App Home's "New run"."""
    forms = _forms(services)
    action = (body.get("actions") or [{}])[0]
    action_id = str(action.get("action_id") or "")
    logger.info("form action %s user=%s", action_id, _user(body))
    try:
        if action_id == RECIPE_ACTION:
            forms.recipe_chosen(body["view"], user=_user(body))
        elif action_id == PREVIEW_ACTION:
            forms.preview(body["view"], str(body.get("trigger_id")), user=_user(body))
        elif action_id == OPEN_ACTION:
            forms.open(str(body.get("trigger_id")), user=_user(body), channel=None, origin="home")
    except ViewError as exc:
        if exc.error not in ("expired_trigger_id", "exchanged_trigger_id", "not_found"):
            raise
        # A trigger lasts 3 s: a delivery carried out again after a crash, or a form closed meanwhile.
        logger.warning("form action %s not shown: %s", action_id, exc)


def handle_submission_delivery(services: Services, body: dict[str, Any]) -> None:
    """After the ack closed the form: start the run (once per form, however often it was submitted)."""
    logger.info("form submitted view=%s user=%s", (body.get("view") or {}).get("id"), _user(body))
    _forms(services).start(body["view"], user=_user(body))


def handle_shortcut_delivery(services: Services, body: dict[str, Any]) -> None:
    """ "Rerun with changes" on a message: the form prefilled with the run whose card it is."""
    channel = str((body.get("channel") or {}).get("id") or "")
    message_ts = str(body.get("message_ts") or (body.get("message") or {}).get("ts") or "")
    logger.info("rerun shortcut user=%s channel=%s", _user(body), channel)
    try:
        _forms(services).open_rerun(
            str(body.get("trigger_id")), user=_user(body), channel=channel, message_ts=message_ts
        )
    except ViewError as exc:
        if exc.error not in ("expired_trigger_id", "exchanged_trigger_id"):
            raise
        logger.warning("rerun form not opened: %s", exc)
