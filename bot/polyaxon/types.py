"""The bot's own view of Polyaxon: runs, logs, metrics, lineage, model versions, artifact files, gateway errors.

Plain pydantic models (and one frozen dataclass): callers never see a Polyaxon client type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

DONE_STATUSES = frozenset({"succeeded", "failed", "stopped", "skipped", "upstream_failed", "done"})


class GatewayError(Exception):
    """Polyaxon could not do what the bot asked; the message says what and why."""


class PolyaxonUnreachableError(GatewayError):
    """Polyaxon did not answer: a refused or dropped connection, a timeout, or a 502/503/504 from whatever stands in
    front of it (a redeploy, an outage). Nothing it was asked to do was done; the same call may go through later."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(message)


class RunNotFoundError(GatewayError):
    """No run with that uuid or name in the project."""


class RunGoneError(RunNotFoundError):
    """Polyaxon no longer has a run the bot knows by its uuid: deleted there, or the server was replaced.

    Polyaxon answers 404 for it (or, while a deletion is in progress, still shows it marked as being deleted).
    """

    def __init__(self, uuid: str, host: str, detail: str = "") -> None:
        self.uuid = uuid
        self.host = host
        super().__init__(
            f"run {uuid} is no longer in Polyaxon at {host}: deleted there, or the server was replaced"
            + (f" ({detail})" if detail else "")
        )


class ProjectMissingError(GatewayError):
    """The bot's project does not exist in Polyaxon (a replaced server's empty store, or deleted there)."""


class ArtifactNotFoundError(GatewayError):
    """No file at that path in the run's artifacts (the run itself exists)."""


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
    # When Polyaxon last changed the run (a status, an outputs sync): the watcher's cursor and liveness signal.
    updated_at: datetime | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    original_uuid: str | None = None
    conditions: list[StatusCondition] = Field(default_factory=list)
    # What Polyaxon holds a not-yet-queued run for: `approval`, `upload`, `build` or `cache` (None: nothing).
    pending: str | None = None

    @property
    def is_done(self) -> bool:
        """Whether the run reached a final status."""
        return self.status in DONE_STATUSES


@dataclass(frozen=True)
class RemoteView:
    """Polyaxon's side of one tick: every active run (`complete`), or only those changed since the last tick."""

    runs: dict[str, RunInfo] = field(default_factory=dict)
    complete: bool = True
    requests: int = 0

    def get(self, uuid: str) -> RunInfo | None:
        """The run as Polyaxon has it now, when this tick listed it."""
        return self.runs.get(uuid)

    def unchanged(self, uuid: str) -> bool:
        """Polyaxon did not change the run since the last tick: the database's state is still Polyaxon's."""
        return not self.complete and uuid not in self.runs


class LogLine(BaseModel):
    """One log line of a run."""

    timestamp: datetime
    container: str | None = None
    value: str


class LogTail(BaseModel):
    """The last lines of a run's logs and a cursor: pass `cursor` as `since` to get only newer ones."""

    lines: list[LogLine]
    cursor: datetime | None = None
    # How many lines the log holds (after `since`), of which `lines` are the last: "15 of 41".
    total: int | None = None


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


@dataclass(frozen=True, slots=True)
class ArtifactFile:
    """One file in a run's artifacts store.

    A frozen dataclass, not a model: a walk can list thousands of these, and they are hashable.
    """

    path: str
    """POSIX path relative to the run's artifacts root, e.g. `outputs/checkpoint-72/model.safetensors`."""
    size: int
    """Bytes, as the store reports it when listed."""
