"""PolyaxonGateway: the bot's typed port to the Polyaxon API (runs, logs, metrics, lineage, models).

Every method returns the bot's own pydantic models and raises `GatewayError` (never a Polyaxon
exception); a `None` where the client promised a value is an error too. The client is built
explicitly from the constructor's arguments, never from `$HOME` or the environment.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")

DONE_STATUSES = frozenset({"succeeded", "failed", "stopped", "skipped", "upstream_failed", "done"})
# Statuses on which a spurious sandbox failure is retried (405 on overlapping writes, 5xx while
# SQLite is locked, 409 on an overlapping status transition).
_RETRY_STATUSES = frozenset({405, 409, 429, 500, 502, 503, 504})
_ACTIVE_LIMIT = 1000


class GatewayError(Exception):
    """Polyaxon could not do what the bot asked; the message says what and why."""


class RunNotFoundError(GatewayError):
    """No run with that uuid or name in the project."""


class StatusCondition(BaseModel):
    """One status transition of a run."""

    type: str
    reason: str | None = None
    message: str | None = None
    at: datetime | None = None


class RunInfo(BaseModel):
    """A Polyaxon run as the bot sees it."""

    uuid: str
    name: str
    status: str
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    original_uuid: str | None = None
    conditions: list[StatusCondition] = Field(default_factory=list)

    @property
    def is_done(self) -> bool:
        """Whether the run reached a final status."""
        return self.status in DONE_STATUSES


class LogLine(BaseModel):
    """One log line of a run."""

    timestamp: datetime
    container: str | None = None
    value: str


class LogTail(BaseModel):
    """The last lines of a run's logs and a cursor: pass `cursor` as `since` to get only newer ones."""

    lines: list[LogLine]
    cursor: datetime | None = None


class MetricPoint(BaseModel):
    """One logged value of a metric."""

    step: int | None = None
    timestamp: datetime | None = None
    value: float


class Artifact(BaseModel):
    """One lineage entry of a run (a metric, an output file or folder, a model, a code ref...)."""

    name: str
    kind: str
    path: str | None = None
    is_input: bool = False
    summary: dict[str, Any] = Field(default_factory=dict)


class ModelVersion(BaseModel):
    """A model version in Polyaxon's project-version registry."""

    name: str
    project: str
    run_uuid: str | None = None
    stage: str | None = None
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    content: dict[str, Any] | str | None = None
    created_at: datetime | None = None


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        raise GatewayError(f"Polyaxon returned a non-date timestamp: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    reason = getattr(exc, "reason", None)
    if status is not None:
        detail = body if body else reason
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        return f"HTTP {status}: {str(detail)[:500]}"
    return f"{type(exc).__name__}: {str(exc)[:500]}"


class PolyaxonGateway:
    """Typed access to one Polyaxon project for the bot."""

    def __init__(
        self,
        *,
        host: str,
        token: str | None,
        owner: str = "default",
        project: str = "finetune",
        timeout_s: float = 10.0,
        write_attempts: int = 5,
    ) -> None:
        # Imported here, once per gateway: the client costs 3-4 s to import. (Whoever imports
        # polyaxon first must have POLYAXON_NO_CONFIG=true set, or it reads config from $HOME.)
        from polyaxon._schemas.client import ClientConfig
        from polyaxon.client import PolyaxonClient
        from polyaxon.exceptions import ApiException, PolyaxonClientException
        from urllib3.exceptions import HTTPError

        # The client logs each failed call at ERROR, showing the *global* client config (not this gateway's
        # host), before raising; the gateway turns the exception into a GatewayError its caller reports once.
        logging.getLogger("polyaxon.cli").setLevel(logging.CRITICAL)
        self.host = host.rstrip("/")
        self.owner = owner
        self.project = project
        self.timeout_s = timeout_s
        self.write_attempts = write_attempts
        self._api_errors: tuple[type[BaseException], ...] = (ApiException,)
        self._transport_errors: tuple[type[BaseException], ...] = (HTTPError, PolyaxonClientException, OSError)
        # retries=0: urllib3 would otherwise retry each request 3 times, multiplying the timeout;
        # the gateway retries writes itself, where that is safe.
        self._config = ClientConfig(
            host=self.host,
            token=token,
            use_https=self.host.startswith("https"),
            verify_ssl=self.host.startswith("https"),
            timeout=timeout_s,
            retries=0,
        )
        self._client = PolyaxonClient(config=self._config, token=token)
        self._namespaces: dict[str, str] = {}

    # Plumbing -------------------------------------------------------------------------------

    def _fail(self, what: str, exc: BaseException) -> GatewayError:
        if isinstance(exc, self._api_errors) and getattr(exc, "status", None) == 404:
            return RunNotFoundError(f"Polyaxon at {self.host}: {what}: not found ({_describe(exc)})")
        if isinstance(exc, self._transport_errors):
            return GatewayError(
                f"Polyaxon at {self.host} is unreachable or did not answer within {self.timeout_s:.0f} s "
                f"while trying to {what} ({_describe(exc)})"
            )
        return GatewayError(f"Polyaxon at {self.host} refused to {what}: {_describe(exc)}")

    def _read(self, what: str, call: Callable[[], T | None]) -> T:
        try:
            result = call()
        except GatewayError:
            raise
        except Exception as exc:
            raise self._fail(what, exc) from exc
        if result is None:
            raise GatewayError(f"Polyaxon at {self.host} returned nothing while trying to {what}")
        return result

    def _write(self, what: str, call: Callable[[], T | None], *, landed: Callable[[], T | None] | None = None) -> T:
        """Run a write with retries on the sandbox's spurious failures.

        `landed` checks whether an earlier attempt took effect after all, so a retried create
        never makes a second object.
        """
        last: BaseException | None = None
        for attempt in range(1, self.write_attempts + 1):
            if attempt > 1 and landed is not None:
                existing = self._read(f"check whether {what} landed", lambda: [landed()])[0]
                if existing is not None:
                    return existing
            try:
                result = call()
            except Exception as exc:
                status = getattr(exc, "status", None)
                retryable = (isinstance(exc, self._api_errors) and status in _RETRY_STATUSES) or (
                    isinstance(exc, self._transport_errors) and not isinstance(exc, self._api_errors)
                )
                if not retryable or attempt == self.write_attempts:
                    raise self._fail(what, exc) from exc
                last = exc
                time.sleep(0.15 * 2**attempt)
                continue
            if result is None:
                raise GatewayError(f"Polyaxon at {self.host} returned nothing while trying to {what}")
            return result
        raise self._fail(what, last or RuntimeError("no attempt made"))

    def _run_from_api(self, run: Any) -> RunInfo:
        if run is None or not getattr(run, "uuid", None):
            raise GatewayError(f"Polyaxon at {self.host} returned an empty run")
        namespace = getattr(getattr(run, "settings", None), "namespace", None)
        if namespace:
            self._namespaces[run.uuid] = namespace
        original = getattr(run, "original", None)
        return RunInfo(
            uuid=run.uuid,
            name=run.name or "",
            status=str(run.status or "created"),
            created_at=_utc(run.created_at),
            started_at=_utc(run.started_at),
            finished_at=_utc(run.finished_at),
            inputs=dict(run.inputs or {}),
            outputs=dict(run.outputs or {}),
            tags=list(run.tags or []),
            description=run.description,
            original_uuid=getattr(original, "uuid", None) if original else None,
        )

    def _namespace(self, uuid: str) -> str:
        if uuid not in self._namespaces:
            self.get_run(uuid, with_conditions=False)
        return self._namespaces.get(uuid, "polyaxon")

    # Projects and runs ----------------------------------------------------------------------

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
        response = self._client.runs_v1.list_runs(self.owner, self.project, query=f"name:{name}", limit=2)
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
            statuses = self._read(
                f"get the statuses of run {uuid}",
                lambda: self._client.runs_v1.get_run_statuses(self.owner, self.project, uuid),
            )
            info.conditions = [
                StatusCondition(
                    type=str(c.type),
                    reason=c.reason,
                    message=c.message,
                    at=_utc(c.last_transition_time or c.last_update_time),
                )
                for c in (statuses.status_conditions or [])
            ]
        return info

    def list_active_runs(self) -> list[RunInfo]:
        """All runs of the project that are not done, in ONE request (what the watcher polls)."""
        query = "status:~" + "|".join(sorted(DONE_STATUSES))
        response = self._read(
            f"list the active runs of {self.owner}/{self.project}",
            lambda: self._client.runs_v1.list_runs(
                self.owner, self.project, query=query, sort="-created_at", limit=_ACTIVE_LIMIT
            ),
        )
        return [self._run_from_api(r) for r in (response.results or [])]

    def list_runs(self, *, limit: int = 50, query: str | None = None) -> list[RunInfo]:
        """The newest runs of the project (optionally filtered by a Polyaxon query), one request."""
        response = self._read(
            f"list the runs of {self.owner}/{self.project}",
            lambda: self._client.runs_v1.list_runs(
                self.owner, self.project, query=query, sort="-created_at", limit=limit
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
    ) -> RunInfo:
        """A new run that starts with a copy of run `uuid`'s artifacts (Polyaxon's `restart(copy=True)`).

        The parent's spec is reused, with `params` (input name -> value, e.g. `resume_from`)
        patched over it; `operation` (a compiled `V1Operation` dict) replaces the spec instead
        (Polyaxon's `recompile`). The copied files land in the new run's artifacts folder, so the
        new op finds the parent's checkpoints under its own outputs path. Idempotent on `name`.
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
        if description:
            body["description"] = description
        run = self._write(
            f"copy run {uuid} as {name}",
            lambda: self._client.runs_v1.copy_run(self.owner, self.project, uuid, body),
            landed=lambda: self._find_raw(name),
        )
        return self._run_from_api(run)

    # Logs, metrics, lineage -----------------------------------------------------------------

    def tail_logs(self, uuid: str, *, lines: int = 50, since: datetime | None = None) -> LogTail:
        """The last `lines` log lines (only those after `since` when given) and a cursor for the next call."""
        namespace = self._namespace(uuid)
        # force=True: without it the API serves a cached copy that goes stale while a run is live.
        # `since` is applied here: the sandbox answers 500 to the API's own `last_time` filter.
        response = self._read(
            f"read the logs of run {uuid}",
            lambda: self._client.runs_v1.get_run_logs(namespace, self.owner, self.project, uuid, force=True),
        )
        parsed = [
            LogLine(timestamp=_utc(log.timestamp) or datetime.now(UTC), container=log.container, value=log.value)
            for log in (response.logs or [])
            if log.value is not None
        ]
        if since is not None:
            parsed = [line for line in parsed if line.timestamp > since]
        parsed.sort(key=lambda line: line.timestamp)
        cursor = parsed[-1].timestamp if parsed else since
        return LogTail(lines=parsed[-lines:] if lines > 0 else [], cursor=cursor)

    def lineage(self, uuid: str, *, kind: str | None = None) -> list[Artifact]:
        """The run's artifacts lineage (metrics, outputs, models, ...), optionally of one kind."""
        response = self._read(
            f"read the lineage of run {uuid}",
            lambda: self._client.runs_v1.get_run_artifacts_lineage(
                self.owner, self.project, uuid, limit=1000, query=f"kind:{kind}" if kind else None
            ),
        )
        return [
            Artifact(
                name=a.name,
                kind=str(a.kind),
                path=a.path,
                is_input=bool(a.is_input),
                summary=dict(a.summary or {}),
            )
            for a in (response.results or [])
        ]

    def last_metrics(self, uuid: str) -> dict[str, float]:
        """The last logged value of every metric of the run (empty before the first sync)."""
        return self.metrics_summary(uuid)[0]

    def metrics_summary(self, uuid: str) -> tuple[dict[str, float], int | None]:
        """The last value of every metric and the highest step any metric reached (one lineage request)."""
        values: dict[str, float] = {}
        step: int | None = None
        for artifact in self.lineage(uuid, kind="metric"):
            last = artifact.summary.get("metric", {}).get("last")
            if isinstance(last, int | float):
                values[artifact.name] = float(last)
            top = artifact.summary.get("step", {}).get("max")
            if isinstance(top, int | float) and (step is None or top > step):
                step = int(top)
        return values, step

    def metric_history(self, uuid: str, names: Sequence[str], *, max_points: int = 200) -> dict[str, list[MetricPoint]]:
        """Each metric's values by step, downsampled here to at most `max_points` (first and last kept)."""
        if not names:
            return {}
        namespace = self._namespace(uuid)

        def fetch() -> Any:
            try:
                return self._client.runs_v1.get_run_events(
                    namespace,
                    self.owner,
                    self.project,
                    uuid,
                    kind="metric",
                    names=",".join(names),
                    orient="dict",
                    force=True,
                )
            except Exception as exc:
                # The API answers 500 while a metrics file has no rows yet: "no metrics yet".
                if getattr(exc, "status", None) == 500:
                    return _NoEvents()
                raise

        response = self._read(f"read the metrics of run {uuid}", fetch)
        history: dict[str, list[MetricPoint]] = {name: [] for name in names}
        for event in response.data or []:
            data = event.get("data", {}) if isinstance(event, dict) else {}
            steps = data.get("step") or []
            stamps = data.get("timestamp") or []
            metric = data.get("metric") or []
            points = [
                MetricPoint(
                    step=int(steps[i]) if i < len(steps) and steps[i] is not None else None,
                    timestamp=_utc(stamps[i]) if i < len(stamps) and stamps[i] else None,
                    value=float(metric[i]),
                )
                for i in range(len(metric))
                if metric[i] is not None
            ]
            history[event["name"]] = _downsample(points, max_points)
        return history

    # Model registry -------------------------------------------------------------------------

    def register_model_version(
        self,
        version: str,
        *,
        run_uuid: str,
        artifacts: Sequence[str] = (),
        description: str | None = None,
        tags: Sequence[str] = (),
        content: dict[str, Any] | None = None,
        force: bool = False,
    ) -> ModelVersion:
        """Register `version` in the project's model registry, bound to a run and its named artifacts."""
        from polyaxon.client import ProjectClient

        client = ProjectClient(owner=self.owner, project=self.project, client=self._client)

        def landed() -> Any:
            try:
                found = client.get_model_version(version)
            except Exception as exc:
                if getattr(exc, "status", None) == 404:
                    return None
                raise
            return found if found is not None and getattr(found, "run", None) == run_uuid else None

        raw = self._write(
            f"register model version {version}",
            lambda: client.register_model_version(
                version,
                description=description,
                tags=list(tags) or None,
                content=content,
                run=run_uuid,
                artifacts=list(artifacts) or None,
                force=force,
            ),
            landed=None if force else landed,
        )
        return _model_version(raw, self.project)

    def get_model_version(self, version: str) -> ModelVersion:
        """Read a model version back from the registry."""
        from polyaxon.client import ProjectClient

        client = ProjectClient(owner=self.owner, project=self.project, client=self._client)
        return _model_version(
            self._read(f"get model version {version}", lambda: client.get_model_version(version)), self.project
        )

    def stage_model_version(self, version: str, stage: str, *, reason: str, message: str | None = None) -> ModelVersion:
        """Move a model version to `stage` (testing, staging, production, disabled) with an audit reason."""
        from polyaxon.client import ProjectClient

        client = ProjectClient(owner=self.owner, project=self.project, client=self._client)
        self._write(
            f"move model version {version} to {stage}",
            lambda: client.stage_model_version(version, stage=stage, reason=reason, message=message) or True,
        )
        return self.get_model_version(version)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()


class _NoEvents:
    data: list[Any] = []  # noqa: RUF012  (a read-only empty answer)


def _operation_content(operation: dict[str, Any]) -> str:
    import json

    if not isinstance(operation, dict) or operation.get("kind") != "operation":
        raise GatewayError("submit needs a compiled operation (a V1Operation dict with kind: operation)")
    return json.dumps(operation)


def _downsample(points: list[MetricPoint], max_points: int) -> list[MetricPoint]:
    """Keep at most `max_points`, evenly spread, always keeping the first and the last point."""
    if max_points <= 0:
        return []
    if len(points) <= max_points:
        return points
    if max_points == 1:
        return [points[-1]]
    stride = (len(points) - 1) / (max_points - 1)
    return [points[round(i * stride)] for i in range(max_points)]


def _model_version(raw: Any, project: str) -> ModelVersion:
    import json

    if raw is None or not getattr(raw, "name", None):
        raise GatewayError("Polyaxon returned an empty model version")
    content = raw.content
    if isinstance(content, str):
        # The API stores content as a JSON string; give back what was registered.
        with contextlib.suppress(ValueError):
            content = json.loads(content)
    return ModelVersion(
        name=raw.name,
        project=project,
        run_uuid=getattr(raw, "run", None),
        stage=str(raw.stage) if getattr(raw, "stage", None) else None,
        description=raw.description,
        tags=list(raw.tags or []),
        artifacts=list(getattr(raw, "artifacts", None) or []),
        content=content,
        created_at=_utc(raw.created_at),
    )
