"""Workflow Builder steps (Slack's custom functions): `function_executed` events and the `functions.*` family.

Modelled on Slack's reference (docs.slack.dev: the `function_executed` event, `functions.completeSuccess`,
`functions.completeError`) and on what Bolt reads (slack_bolt/request/internals.py: `function_execution_id` and
`bot_access_token` inside the event). Each execution carries its own workflow token (`xwfp-…`), valid for any
Web API call while the execution runs and revoked once it completes (`token_revoked`), as Slack's are. An
execution completes once: a second completion is `execution_not_in_running_state`, an unknown id
`function_execution_not_found`, and outputs that do not match the function's declared `output_parameters`
(names, required ones, types) are `parameter_validation_failed`. The functions are read from the app manifest.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.local.slack.state import APP_ID, ApiError, ApiMethod, Workspace, maybe_json

WORKFLOW_TOKEN_PREFIX = "xwfp-"
MANIFEST = Path(__file__).resolve().parents[3] / "manifests" / "slack" / "app-manifest.yaml"
_USER = re.compile(r"[UW][A-Z0-9]{2,20}")
_CHANNEL = re.compile(r"[CGD][A-Z0-9]{2,20}")


@dataclass
class FunctionExecution:
    """One execution of a step: its inputs, its workflow token, and how it ended (`running` until completed)."""

    id: str
    callback_id: str
    workflow_execution_id: str
    inputs: dict[str, Any]
    token: str
    state: str = "running"  # running, completed, failed
    outputs: dict[str, Any] | None = None
    error: str | None = None
    completions: list[str] = field(default_factory=list)  # every completion call, refused ones included


def load_functions(path: Path = MANIFEST) -> dict[str, dict[str, Any]]:
    """The `functions` the app manifest declares, by callback id ({} without a manifest)."""
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return dict(data.get("functions") or {})


def parameters(definition: dict[str, Any], which: str) -> list[dict[str, Any]]:
    """A function's input or output parameters as the event lists them (Slack's `FunctionParams`)."""
    declared = definition.get(which) or {}
    required = set(declared.get("required") or [])
    return [
        {
            "type": spec.get("type"),
            "name": name,
            "title": spec.get("title", name),
            "description": spec.get("description", ""),
            "is_required": name in required,
        }
        for name, spec in (declared.get("properties") or {}).items()
    ]


def start(ws: Workspace, callback_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """A workflow reached the step `callback_id`: a new execution, and the `function_executed` event for it."""
    definition = ws.functions.get(callback_id)
    if definition is None:
        raise ApiError("function_not_found")
    execution = FunctionExecution(
        id="Fx" + secrets.token_hex(5).upper(),
        callback_id=callback_id,
        workflow_execution_id="Wx" + secrets.token_hex(5).upper(),
        inputs=dict(inputs),
        token=WORKFLOW_TOKEN_PREFIX + secrets.token_hex(16),
    )
    ws.executions[execution.id] = execution
    now = int(time.time())
    return {
        "type": "function_executed",
        "function": {
            "id": "Fn" + secrets.token_hex(5).upper(),
            "callback_id": callback_id,
            "title": definition.get("title", callback_id),
            "description": definition.get("description", ""),
            "type": "app",
            "input_parameters": parameters(definition, "input_parameters"),
            "output_parameters": parameters(definition, "output_parameters"),
            "app_id": APP_ID,
            "date_created": now,
            "date_updated": now,
            "date_deleted": 0,
        },
        "inputs": dict(inputs),
        "function_execution_id": execution.id,
        "workflow_execution_id": execution.workflow_execution_id,
        "bot_access_token": execution.token,
    }


def check_workflow_token(ws: Workspace, token: str) -> None:
    """A workflow token authenticates while its execution runs; `token_revoked` after, `invalid_auth` if unknown."""
    for execution in ws.executions.values():
        if execution.token == token:
            if execution.state != "running":
                raise ApiError("token_revoked")
            return
    raise ApiError("invalid_auth")


def _execution(ws: Workspace, args: dict[str, Any], method: str) -> FunctionExecution:
    execution = ws.executions.get(str(args.get("function_execution_id") or ""))
    if execution is None:
        raise ApiError("function_execution_not_found")
    execution.completions.append(method)
    if execution.state != "running":
        raise ApiError("execution_not_in_running_state")
    return execution


def output_problems(definition: dict[str, Any], outputs: Any) -> list[str]:
    """What is wrong with `outputs` against the declared output parameters (empty: nothing)."""
    if not isinstance(outputs, dict):
        return ["outputs must be a JSON object"]
    declared = definition.get("output_parameters") or {}
    properties: dict[str, Any] = declared.get("properties") or {}
    problems = [f"unknown output `{name}`" for name in outputs if name not in properties]
    problems += [f"missing required output `{n}`" for n in declared.get("required") or [] if n not in outputs]
    for name, value in outputs.items():
        kind = (properties.get(name) or {}).get("type")
        if name in properties and not _fits(kind, value):
            problems.append(f"output `{name}` is not of type {kind}")
    return problems


def _fits(kind: Any, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "slack#/types/user_id":
        return isinstance(value, str) and _USER.fullmatch(value) is not None
    if kind == "slack#/types/channel_id":
        return isinstance(value, str) and _CHANNEL.fullmatch(value) is not None
    return True  # other Slack types are not modelled


def complete_success(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """functions.completeSuccess: the execution ends with outputs that match its declared output parameters."""
    execution = _execution(ws, args, "functions.completeSuccess")
    if "outputs" not in args:
        raise ApiError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing required field: outputs"]})
    outputs = maybe_json(args.get("outputs"))
    problems = output_problems(ws.functions.get(execution.callback_id) or {}, outputs)
    if problems:
        raise ApiError("parameter_validation_failed", errors=problems)
    execution.state, execution.outputs = "completed", dict(outputs)
    return {}


def complete_error(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """functions.completeError: the execution ends with an error the workflow's Slackbot message shows."""
    execution = _execution(ws, args, "functions.completeError")
    error = args.get("error")
    if not isinstance(error, str) or not error.strip():
        raise ApiError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing required field: error"]})
    execution.state, execution.error = "failed", error
    return {}


METHODS: dict[str, ApiMethod] = {
    "functions.completeSuccess": complete_success,
    "functions.completeError": complete_error,
}
