"""What a `function_executed` event asks, checked again here: Workflow Builder passes whatever a workflow's author
mapped into each input, so nothing in it is trusted before it passes the same checks a typed command does. Pure.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.grammar import CommandError, PromoteCommand, RunCommand, parse_command
from bot.slack.blocks import is_user_id
from bot.slack.channels import is_channel_id

START_RUN = "start_finetune_run"
REQUEST_PROMOTION = "request_promotion"
STEP_CALLBACKS: tuple[str, ...] = (START_RUN, REQUEST_PROMOTION)
# Keys a step takes as inputs of their own: in `overrides` they would silently replace them.
OWN_KEYS = ("recipe", "preset", "presets")
MAX_INPUT_CHARS = 2000  # a recipe, a preset list or a line of overrides is far shorter


class StepInputError(CommandError):
    """An input the step cannot take; its message is what the workflow's Slackbot error says."""


@dataclass(frozen=True)
class Execution:
    """One execution of a step as the event carries it (`token`: the execution's own workflow token, or None)."""

    function_execution_id: str
    callback_id: str
    workflow_execution_id: str | None
    inputs: dict[str, Any]
    token: str | None

    @property
    def delivery_key(self) -> str:
        """What names the work this execution starts (a run is named after it): the same on every redelivery."""
        return "function:" + self.function_execution_id


def read_execution(body: Mapping[str, Any]) -> Execution | None:
    """The execution of a `function_executed` envelope, or None when the event is not one Slack would send."""
    event = body.get("event")
    if not isinstance(event, Mapping) or event.get("type") != "function_executed":
        return None
    function = event.get("function")
    execution_id, inputs = event.get("function_execution_id"), event.get("inputs")
    if not isinstance(function, Mapping) or not isinstance(execution_id, str) or not execution_id:
        return None
    callback_id = function.get("callback_id")
    if callback_id not in STEP_CALLBACKS or not isinstance(inputs, Mapping):
        return None
    workflow = event.get("workflow_execution_id")
    token = event.get("bot_access_token")
    return Execution(
        function_execution_id=execution_id[:64],
        callback_id=str(callback_id),
        workflow_execution_id=workflow[:64] if isinstance(workflow, str) else None,
        inputs=dict(inputs),
        token=token if isinstance(token, str) and token else None,
    )


def text_input(inputs: Mapping[str, Any], name: str, *, required: bool) -> str | None:
    """A string input, stripped; StepInputError when a required one is missing or one is not text."""
    value = inputs.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise StepInputError(f"the step needs its `{name}` input; set it in the workflow")
        return None
    if not isinstance(value, str):
        raise StepInputError(f"the `{name}` input must be text")
    if len(value) > MAX_INPUT_CHARS:
        raise StepInputError(f"the `{name}` input is longer than {MAX_INPUT_CHARS} characters")
    return value.strip()


def requester_input(inputs: Mapping[str, Any]) -> str:
    """The person the workflow names as requester (a Slack user id)."""
    requester = text_input(inputs, "requester", required=True)
    if not is_user_id(requester):
        raise StepInputError("the `requester` input is not a Slack user; map it to the person who used the workflow")
    return str(requester)


def run_inputs(inputs: Mapping[str, Any]) -> tuple[RunCommand, str, str]:
    """(the run command, channel, requester) of `start_finetune_run`, parsed by `/finetune run`'s own grammar."""
    requester = requester_input(inputs)
    channel = text_input(inputs, "channel", required=True)
    if not is_channel_id(channel):
        raise StepInputError("the `channel` input is not a Slack channel; pick a channel in the workflow")
    recipe = str(text_input(inputs, "recipe", required=True))
    presets = text_input(inputs, "presets", required=False)
    overrides = text_input(inputs, "overrides", required=False) or ""
    check_overrides(overrides)
    words = ["run", f"recipe={shlex.quote(recipe)}"]
    if presets:
        words.append(f"preset={shlex.quote(presets.replace(' ', ''))}")
    try:
        command = parse_command(" ".join([*words, overrides]))
    except CommandError as exc:
        raise StepInputError(f"bad step inputs: {exc.message}", suggestions=exc.suggestions) from None
    if not isinstance(command, RunCommand):  # pragma: no cover - the text starts with `run`
        raise StepInputError("the inputs do not make a run")
    return command, channel, requester


def check_overrides(overrides: str) -> None:
    """Overrides are KEY=VALUE pairs only: no flags (a step never forces, skips a preflight or dry-runs) and no
    recipe or presets (those are inputs of their own)."""
    try:
        tokens = shlex.split(overrides.replace("\u201c", '"').replace("\u201d", '"').replace("\u2019", "'"))
    except ValueError as exc:
        raise StepInputError(f"the `overrides` input does not parse ({exc}); write KEY=VALUE pairs") from None
    for token in tokens:
        key, sep, _ = token.partition("=")
        if token.startswith("-"):
            raise StepInputError(f"`{token}` is a flag, not an override: a workflow step never takes flags")
        if not sep or not key:
            raise StepInputError(f"`{token}` is not KEY=VALUE; the `overrides` input takes KEY=VALUE pairs")
        if key.lower() in OWN_KEYS:
            raise StepInputError(f"`{key}=` is an input of its own, not an override; set it in the step's `{key}`")


def promotion_inputs(inputs: Mapping[str, Any]) -> tuple[PromoteCommand, str]:
    """(the promote command, requester) of `request_promotion`, parsed by `/finetune promote`'s own grammar."""
    requester = requester_input(inputs)
    version = str(text_input(inputs, "model_version", required=True))
    stage = str(text_input(inputs, "stage", required=True))
    if any(ch.isspace() for ch in version + stage):
        raise StepInputError("`model_version` is MODEL:VERSION and `stage` one word, without spaces")
    try:
        command = parse_command(f"promote {version} stage={stage}")
    except CommandError as exc:
        raise StepInputError(f"bad step inputs: {exc.message}", suggestions=exc.suggestions) from None
    if not isinstance(command, PromoteCommand):  # pragma: no cover - the text starts with `promote`
        raise StepInputError("the inputs do not make a promotion")
    return command, requester
