"""A JSON report a run's job wrote into its outputs (a preflight's, a serving check's), read back from Polyaxon."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonGateway


def read_run_report(gateway: PolyaxonGateway, run: Run, path: str, *, max_bytes: int) -> dict[str, Any] | None:
    """The JSON object at `path` in the run's artifacts; None when the run wrote none (or not an object).

    GatewayError while Polyaxon is unreachable: the caller tries again on a later tick. A lost run has none: what
    its files say is no evidence once Polyaxon no longer has the run (bot.runs.lost).
    """
    from bot.polyaxon import ArtifactNotFoundError

    if not run.polyaxon_uuid or run.status == repos.LOST_STATUS:
        return None
    try:
        data = gateway.read_artifact(run.polyaxon_uuid, path, max_bytes=max_bytes)
    except ArtifactNotFoundError:
        return None
    try:
        report = json.loads(data)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None
