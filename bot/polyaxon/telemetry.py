"""Logs, metrics and lineage of a run."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bot.polyaxon.base import GatewayBase, _utc
from bot.polyaxon.types import Artifact, LogLine, LogTail, MetricPoint


class TelemetryApi(GatewayBase):
    """What a run reports while and after it trains."""

    def tail_logs(self, uuid: str, *, lines: int = 50, since: datetime | None = None) -> LogTail:
        """The last `lines` log lines (only those after `since` when given) and a cursor for the next call.

        The run is read first (RunGoneError when Polyaxon no longer has it): the logs endpoint serves the files a
        deleted run left behind as if nothing happened.
        """
        namespace = self._namespace(uuid, fresh=True)
        # force=True: without it the API serves a cached copy that goes stale while a run is live.
        # `since` is applied here: the sandbox answers 500 to the API's own `last_time` filter.
        response = self._read(
            f"read the logs of run {uuid}",
            lambda: self._client.runs_v1.get_run_logs(namespace, self.owner, self.project, uuid, force=True),
            run=uuid,
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
        return LogTail(lines=parsed[-lines:] if lines > 0 else [], cursor=cursor, total=len(parsed))

    def lineage(self, uuid: str, *, kind: str | None = None) -> list[Artifact]:
        """The run's artifacts lineage (metrics, outputs, models, ...), optionally of one kind."""
        response = self._read(
            f"read the lineage of run {uuid}",
            lambda: self._client.runs_v1.get_run_artifacts_lineage(
                self.owner, self.project, uuid, limit=1000, query=f"kind:{kind}" if kind else None
            ),
            run=uuid,
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

        response = self._read(f"read the metrics of run {uuid}", fetch, run=uuid)
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


class _NoEvents:
    data: list[Any] = []  # noqa: RUF012  (a read-only empty answer)


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
