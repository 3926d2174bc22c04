"""Compile component + presets + params into a Polyaxon operation with Polyaxon's own checker.

The one place the catalog's code touches `polyaxon`. Presets are merged client-side (CE ignores
named presets): the component and the preset files go, in order, through
`check_polyaxonfile(polyaxonfile=[component, *presets], params=..., is_cli=False, to_op=True)`,
which merges each preset with its own patch strategy and validates the params against the
component's inputs. `check_polyaxonfile` only accepts file paths (it `stat`s every entry), so the
dicts are written to a temporary folder first.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from polyaxon._polyaxonfile.specs import OperationSpecification

_TEMPLATE_RE = re.compile(r"^\{\{\s*(?:params\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
DRY_RUN_UUID = "0" * 32
DRY_RUN_NAME = "dry-run"
OFFLINE_NAMESPACE = "finetune"
OFFLINE_ARTIFACTS_STORE = "artifacts_store"


class OperationSpecError(Exception):
    """Polyaxon refused the component, a preset or a parameter; the message says why."""


def _specification() -> type[OperationSpecification]:
    # Polyaxon's polyaxonfile readers bring Kubernetes' models, and with them ~80 MB and ~1,000 modules: imported
    # by the first command that compiles an operation, not by every process that imports the catalog or serves.
    from polyaxon._polyaxonfile.specs import OperationSpecification

    return OperationSpecification


def _reason(exc: BaseException) -> str:
    """Polyaxon's message, with the causes it wraps (its top-level message is generic)."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        text = str(current).strip()
        if text and text not in parts:
            parts.append(text)
        current = current.__cause__ or current.__context__
    return ": ".join(parts) or type(exc).__name__


def compile_operation(
    component: dict[str, Any], presets: list[dict[str, Any]], params: dict[str, Any]
) -> dict[str, Any]:
    """Merge presets over the component, bind params, validate with Polyaxon; return `V1Operation.to_dict()`."""
    from polyaxon._polyaxonfile.check import check_polyaxonfile

    specification = _specification()
    with tempfile.TemporaryDirectory(prefix="finetune-spec-") as folder:
        paths: list[str] = []
        for index, document in enumerate([component, *presets]):
            path = Path(folder) / f"{index:02d}.json"
            # JSON is YAML: Polyaxon's reader takes it as is, with no YAML re-typing of strings.
            path.write_text(json.dumps(document), encoding="utf-8")
            paths.append(str(path))
        try:
            operation = check_polyaxonfile(
                polyaxonfile=cast(Any, paths), params=params, is_cli=False, to_op=True, verbose=False
            )
            # The checker validates params; compiling also applies the presets' runPatch to the
            # run section, which is where a preset for the wrong run kind fails.
            specification.compile_operation(operation)
        except Exception as exc:  # Polyaxon raises many exception types; all mean "invalid spec".
            raise OperationSpecError(f"Polyaxon refused the operation: {_reason(exc)}") from exc
    result: dict[str, Any] = operation.to_dict()
    return result


def check_operation(operation: dict[str, Any]) -> None:
    """Validate an operation dict as Polyaxon reads it (a matrix section included); OperationSpecError if refused."""
    specification = _specification()
    try:
        specification.read(operation)
    except Exception as exc:  # Polyaxon raises many exception types; all mean "invalid spec".
        raise OperationSpecError(f"Polyaxon refused the operation: {_reason(exc)}") from exc


def _connection_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "connections" and isinstance(value, list):
                yield from (name for name in value if isinstance(name, str))
            else:
                yield from _connection_names(value)
    elif isinstance(node, list):
        for item in node:
            yield from _connection_names(item)


def _declared_connections(operation: dict[str, Any]) -> Iterator[str]:
    """Connection names of an operation, with `{{ param }}` names resolved from params or defaults."""
    values: dict[str, Any] = {}
    for item in operation.get("component", {}).get("inputs", []) or []:
        values[item["name"]] = item.get("value")
    for name, param in (operation.get("params") or {}).items():
        values[name] = param.get("value") if isinstance(param, dict) else param
    for name in _connection_names(operation):
        match = _TEMPLATE_RE.match(name)
        resolved = values.get(match.group(1)) if match else name
        if isinstance(resolved, str) and resolved:
            yield resolved


def to_pod_spec(operation: dict[str, Any], *, run_uuid: str | None = None) -> dict[str, Any]:
    """Convert a compiled operation offline with Polyaxon's Kubernetes converter; return the resource dict.

    Every connection the resolved operation names is declared as a placeholder host-path
    connection, so the conversion needs no cluster and no agent. Polyaxon's converter reads the
    agent config from a module global, which is set for the call and restored afterwards.
    """
    from kubernetes import client as k8s_client
    from polyaxon import settings
    from polyaxon._compiler import resolver
    from polyaxon._compiler.resolver.runtime import BaseResolver
    from polyaxon._k8s.executor.base import BaseExecutor
    from polyaxon._schemas.agent import AgentConfig

    specification = _specification()
    run_id = run_uuid or uuid.uuid4().hex
    try:
        spec = specification.read(operation)
        compiled = specification.compile_operation(spec)
        names = sorted(set(_declared_connections(operation)) - {OFFLINE_ARTIFACTS_STORE})
    except Exception as exc:
        raise OperationSpecError(f"Polyaxon could not compile the operation: {_reason(exc)}") from exc
    agent = cast(
        AgentConfig,
        AgentConfig.from_dict(
            {
                "namespace": OFFLINE_NAMESPACE,
                "artifactsStore": {
                    "name": OFFLINE_ARTIFACTS_STORE,
                    "kind": "host_path",
                    "schema": {"hostPath": "/srv/artifacts", "mountPath": "/plx-context/artifacts"},
                },
                "connections": [
                    {
                        "name": name,
                        "kind": "host_path",
                        "schema": {"hostPath": f"/srv/{name}", "mountPath": f"/connections/{name}"},
                    }
                    for name in names
                ],
            }
        ),
    )

    class _OfflineResolver(BaseResolver):
        def resolve_agent(self) -> None:
            self.agent_config = agent.clone()

    previous = settings.AGENT_CONFIG
    settings.AGENT_CONFIG = agent
    try:
        resolved, compiled = resolver.resolve(
            owner_name="default",
            project_name="finetune",
            project_uuid="finetune",
            run_name=DRY_RUN_NAME,
            run_uuid=run_id,
            run_path=run_id,
            compiled_operation=compiled,
            params=spec.params,
            resolver_cls=_OfflineResolver,
        )
        resource = BaseExecutor.get_resource(
            namespace=resolved.namespace,
            owner_name="default",
            project_name="finetune",
            run_name=DRY_RUN_NAME,
            run_uuid=run_id,
            run_path=run_id,
            compiled_operation=compiled,
            artifacts_store=resolved.artifacts_store,
            connection_by_names=resolved.connection_by_names,
            secrets=resolved.secrets,
            config_maps=resolved.config_maps,
            polyaxon_sidecar=resolved.polyaxon_sidecar,
            polyaxon_init=resolved.polyaxon_init,
            default_sa="default",
        )
    except Exception as exc:
        raise OperationSpecError(f"Polyaxon could not convert the operation: {_reason(exc)}") from exc
    finally:
        settings.AGENT_CONFIG = previous
    converted: dict[str, Any] = k8s_client.ApiClient().sanitize_for_serialization(resource)
    return converted
