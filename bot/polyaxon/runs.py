"""Projects and runs: create the project, submit, find, list, stop and copy runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bot.polyaxon.base import GatewayBase, _utc
from bot.polyaxon.types import DONE_STATUSES, GatewayError, RunInfo, StatusCondition

_ACTIVE_LIMIT = 1000
# 100,000 runs at most are listed in one call (beyond, active runs look ended and are read one by one).
_MAX_PAGES = 100


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

    def submit(
        self,
        operation: dict[str, Any],
        *,
        name: str,
        tags: Sequence[str] = (),
        description: str | None = None,
    ) -> RunInfo:
        """Submit a compiled operation (a `V1Operation` dict) as run `name`; returns an existing run of that name."""
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
        """One run, with its status conditions (two requests) unless `with_conditions=False`."""
        raw = self._read(f"get run {uuid}", lambda: self._client.runs_v1.get_run(self.owner, self.project, uuid))
        info = self._run_from_api(raw)
        if with_conditions:
            info.conditions = self.run_conditions(uuid)
        return info

    def run_conditions(self, uuid: str) -> list[StatusCondition]:
        """A run's status conditions, oldest first (one request; a listed run does not carry them)."""
        statuses = self._read(
            f"get the statuses of run {uuid}",
            lambda: self._client.runs_v1.get_run_statuses(self.owner, self.project, uuid),
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

    def list_active_runs(self, *, page_size: int = _ACTIVE_LIMIT) -> list[RunInfo]:
        """All runs of the project that are not done: one request per `page_size` runs, oldest first.

        Pages go oldest first, so a run submitted meanwhile lands on a later page instead of shifting the rest; a
        run that ends between two pages may shift one run past a page boundary, which then looks as if it left
        the list and is read on its own (its state is right either way).
        """
        query = "status:~" + "|".join(sorted(DONE_STATUSES))
        return self._paged(f"list the active runs of {self.owner}/{self.project}", query, "created_at", page_size)

    def list_changed_runs(self, since: datetime, *, page_size: int = _ACTIVE_LIMIT) -> list[RunInfo]:
        """The project's top-level runs Polyaxon changed at or after `since`, done ones included, least recent first.

        One request per `page_size` changed runs (Polyaxon compares `updated_at` to the microsecond). A run
        changed while the pages are read moves to the end and may shift another past a page boundary, which is
        why the caller's cursor does not pass the first page's end when there was more than one
        (bot.watch.changes).
        """
        query = f"pipeline.uuid:nil, updated_at:>={since.astimezone(UTC).isoformat()}"
        return self._paged(f"list the changed runs of {self.owner}/{self.project}", query, "updated_at", page_size)

    def last_change(self) -> datetime | None:
        """When Polyaxon last changed any top-level run of the project (one request); None for an empty project."""
        response = self._read(
            f"read the last change in {self.owner}/{self.project}",
            lambda: self._client.runs_v1.list_runs(
                self.owner, self.project, query="pipeline.uuid:nil", sort="-updated_at", limit=1
            ),
        )
        newest = list(response.results or [])
        return _utc(newest[0].updated_at) if newest else None

    def _paged(self, what: str, query: str, sort: str, page_size: int) -> list[RunInfo]:
        runs: dict[str, RunInfo] = {}

        def page_at(offset: int) -> Any:
            return self._client.runs_v1.list_runs(
                self.owner, self.project, query=query, sort=sort, limit=page_size, offset=offset
            )

        for page in range(_MAX_PAGES):
            results = list(self._read(what, partial(page_at, page * page_size)).results or [])
            for raw in results:
                info = self._run_from_api(raw)
                runs[info.uuid] = info  # a run listed twice (it moved between pages): its later state wins
            if len(results) < page_size:
                break
        return list(runs.values())

    def list_runs(self, *, limit: int = 50, query: str | None = None) -> list[RunInfo]:
        """The newest runs of the project (optionally filtered by a Polyaxon query), one request."""
        response = self._read(
            f"list the runs of {self.owner}/{self.project}",
            lambda: self._client.runs_v1.list_runs(
                self.owner, self.project, query=query, sort="-created_at", limit=limit
            ),
        )
        return [self._run_from_api(r) for r in (response.results or [])]

    def list_children(self, uuid: str, *, limit: int = _ACTIVE_LIMIT) -> list[RunInfo]:
        """The runs a pipeline run (a sweep's matrix) created, oldest first, with inputs and outputs: ONE request."""
        response = self._read(
            f"list the trials of run {uuid}",
            lambda: self._client.runs_v1.list_runs(
                self.owner, self.project, query=f"pipeline.uuid:{uuid}", sort="created_at", limit=limit
            ),
        )
        return [self._run_from_api(r) for r in (response.results or [])]

    def stop(self, uuid: str) -> None:
        """Ask Polyaxon to stop a run (the agent SIGTERMs it, SIGKILLs after its grace period)."""

        def already_stopping() -> bool | None:
            run = self._client.runs_v1.get_run(self.owner, self.project, uuid)
            return True if run is not None and run.status in DONE_STATUSES | {"stopping"} else None

        self._write(
            f"stop run {uuid}",
            lambda: self._client.runs_v1.stop_run(self.owner, self.project, uuid) or True,
            landed=already_stopping,
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
        Idempotent on `name`.
        """
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
        run = self._write(
            f"copy run {uuid} as {name}",
            lambda: self._client.runs_v1.copy_run(self.owner, self.project, uuid, body),
            landed=lambda: self._find_raw(name),
        )
        return self._run_from_api(run)


def _operation_content(operation: dict[str, Any]) -> str:
    if not isinstance(operation, dict) or operation.get("kind") != "operation":
        raise GatewayError("submit needs a compiled operation (a V1Operation dict with kind: operation)")
    return json.dumps(operation)
