"""Projects and runs: create the project (again, when Polyaxon lost it), submit, find, read, stop and copy runs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bot.polyaxon.base import GatewayBase, _utc
from bot.polyaxon.types import DONE_STATUSES, GatewayError, ProjectMissingError, RunInfo, StatusCondition

T = TypeVar("T")
log = logging.getLogger(__name__)


class RunsApi(GatewayBase):
    """The run lifecycle as the bot uses it."""

    def ensure_project(self) -> None:
        """Create the gateway's project if it does not exist yet."""
        projects = self._client.projects_v1

        def existing() -> Any:
            try:
                return projects.get_project(self.owner, self.project)
            except Exception as exc:
                if getattr(exc, "status", None) == 404:
                    return None
                raise

        if self._read(f"look up project {self.owner}/{self.project}", lambda: [existing()])[0] is not None:
            return
        self._write(
            f"create project {self.owner}/{self.project}",
            lambda: projects.create_project(self.owner, {"name": self.project}),
            landed=existing,
        )

    def _in_project(self, create: Callable[[], T]) -> T:
        """A create in the project; when Polyaxon says the project is missing (a replaced server's empty store, or
        deleted in its UI), the project is created again and the create retried once (idempotent on the name)."""
        try:
            return create()
        except ProjectMissingError as exc:
            log.warning("%s; creating it again", exc)
            self.ensure_project()
            return create()

    def submit(
        self,
        operation: dict[str, Any],
        *,
        name: str,
        tags: Sequence[str] = (),
        description: str | None = None,
    ) -> RunInfo:
        """Submit a compiled operation (a `V1Operation` dict) as run `name`; returns an existing run of that name."""
        return self._in_project(lambda: self._submit(operation, name=name, tags=tags, description=description))

    def _submit(self, operation: dict[str, Any], *, name: str, tags: Sequence[str], description: str | None) -> RunInfo:
        existing = self.find_run(name)
        if existing is not None:
            return existing
        body: dict[str, Any] = {
            "name": name,
            "content": _operation_content(operation),
            "tags": list(tags),
            "is_managed": True,
            "managed_by": "agent",
        }
        if description:
            body["description"] = description
        run = self._write(
            f"submit run {name}",
            lambda: self._client.runs_v1.create_run(self.owner, self.project, body),
            landed=lambda: self._find_raw(name),
        )
        return self._run_from_api(run)

    def _find_raw(self, name: str) -> Any:
        # Only top-level runs: the trials of a matrix carry the matrix's own name (`pipeline.uuid:nil` leaves them out).
        response = self._client.runs_v1.list_runs(
            self.owner, self.project, query=f"name:{name}, pipeline.uuid:nil", limit=2
        )
        results = [r for r in (response.results or []) if r.name == name] if response else []
        return results[0] if results else None

    def find_run(self, name: str) -> RunInfo | None:
        """The run called `name` in the project, or None."""
        raw = self._read(f"look up run {name}", lambda: [self._find_raw(name)])[0]
        return self._run_from_api(raw) if raw is not None else None

    def get_run(self, uuid: str, *, with_conditions: bool = True) -> RunInfo:
        """One run, with its status conditions (two requests) unless `with_conditions=False`.

        RunGoneError when Polyaxon no longer has it (deleted there, or the server was replaced).
        """
        info = self._run_from_api(self._get_live_run(uuid))
        if with_conditions:
            info.conditions = self.run_conditions(uuid)
        return info

    def run_conditions(self, uuid: str) -> list[StatusCondition]:
        """A run's status conditions, oldest first (one request; a listed run does not carry them)."""
        statuses = self._read(
            f"get the statuses of run {uuid}",
            lambda: self._client.runs_v1.get_run_statuses(self.owner, self.project, uuid),
            run=uuid,
        )
        return [
            StatusCondition(
                type=str(c.type),
                reason=c.reason,
                message=c.message,
                at=_utc(c.last_transition_time or c.last_update_time),
            )
            for c in (statuses.status_conditions or [])
        ]

    def stop(self, uuid: str) -> None:
        """Ask Polyaxon to stop a run (the agent SIGTERMs it, SIGKILLs after its grace period).

        Read first: Polyaxon accepts a stop of a run it is deleting, which would only look as if it stopped.
        """
        if self._get_live_run(uuid).status in DONE_STATUSES | {"stopping"}:
            return

        def already_stopping() -> bool | None:
            run = self._client.runs_v1.get_run(self.owner, self.project, uuid)
            return True if run is not None and run.status in DONE_STATUSES | {"stopping"} else None

        self._write(
            f"stop run {uuid}",
            lambda: self._client.runs_v1.stop_run(self.owner, self.project, uuid) or True,
            landed=already_stopping,
            run=uuid,
        )

    def copy_run(
        self,
        uuid: str,
        *,
        name: str,
        operation: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        tags: Sequence[str] = (),
        description: str | None = None,
        copy_dirs: Sequence[str] = (),
    ) -> RunInfo:
        """A new run that starts with a copy of run `uuid`'s artifacts (Polyaxon's `restart(copy=True)`).

        The parent's spec is reused, with `params` (input name -> value, e.g. `resume_from`)
        patched over it; `operation` (a compiled `V1Operation` dict) replaces the spec instead
        (Polyaxon's `recompile`). The copied files land in the new run's artifacts folder, so the
        new op finds the parent's checkpoints under its own outputs path: all of them, or only
        `copy_dirs` (folders relative to the parent's artifacts, e.g. `outputs/checkpoint-72`).
        Idempotent on `name`. RunGoneError when Polyaxon no longer has run `uuid` (Polyaxon would copy a run it is
        deleting).
        """
        return self._in_project(
            lambda: self._copy_run(
                uuid,
                name=name,
                operation=operation,
                params=params,
                tags=tags,
                description=description,
                copy_dirs=copy_dirs,
            )
        )

    def _copy_run(
        self,
        uuid: str,
        *,
        name: str,
        operation: dict[str, Any] | None,
        params: dict[str, Any] | None,
        tags: Sequence[str],
        description: str | None,
        copy_dirs: Sequence[str],
    ) -> RunInfo:
        existing = self.find_run(name)
        if existing is not None:
            return existing
        body: dict[str, Any] = {"name": name, "tags": list(tags)}
        if operation is not None:
            body["content"] = _operation_content(operation)
            body["meta_info"] = {"recompile": True}
        elif params:
            override = {"version": 1.1, "kind": "operation", "params": {k: {"value": v} for k, v in params.items()}}
            body["content"] = _operation_content(override)
        if copy_dirs:
            # Polyaxon's copy init step takes paths under the artifacts store: `<parent uuid>/<path>`.
            body["meta_info"] = {
                **body.get("meta_info", {}),
                "copy_artifacts": {"dirs": [f"{uuid}/{path.strip('/')}" for path in copy_dirs]},
            }
        if description:
            body["description"] = description
        self._get_live_run(uuid)
        run = self._write(
            f"copy run {uuid} as {name}",
            lambda: self._client.runs_v1.copy_run(self.owner, self.project, uuid, body),
            landed=lambda: self._find_raw(name),
            run=uuid,
        )
        return self._run_from_api(run)


def _operation_content(operation: dict[str, Any]) -> str:
    if not isinstance(operation, dict) or operation.get("kind") != "operation":
        raise GatewayError("submit needs a compiled operation (a V1Operation dict with kind: operation)")
    return json.dumps(operation)
