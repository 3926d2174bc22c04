"""Lists of the project's runs: the active ones, the changed ones (the watcher's feed), the newest, a pipeline's."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from bot.polyaxon.base import GatewayBase, _utc
from bot.polyaxon.types import DONE_STATUSES, RunInfo

_ACTIVE_LIMIT = 1000
# 100,000 runs at most are listed in one call (beyond, active runs look ended and are read one by one).
_MAX_PAGES = 100


class ListingApi(GatewayBase):
    """Runs listed in pages or one request: what the watcher and the commands see of the whole project.

    ProjectMissingError (bot.polyaxon.types) when Polyaxon has no such project (a replaced server's empty store).
    """

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
