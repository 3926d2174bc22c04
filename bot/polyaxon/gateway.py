"""PolyaxonGateway: the bot's typed port to the Polyaxon API (runs, logs, metrics, lineage, models, artifacts).

One class for callers, built from one topic class per thing it talks about: `runs.py` (projects and
runs), `listing.py` (lists of runs), `telemetry.py` (logs, metrics, lineage), `models.py` (the model
registry), `artifacts.py` (the files in a run's artifacts store), over the shared plumbing in `base.py`
(client, error translation, retried writes). The types are in `types.py`.
"""

from __future__ import annotations

from bot.polyaxon.artifacts import ArtifactsApi
from bot.polyaxon.listing import ListingApi
from bot.polyaxon.models import ModelsApi
from bot.polyaxon.runs import RunsApi
from bot.polyaxon.telemetry import TelemetryApi


class PolyaxonGateway(RunsApi, ListingApi, TelemetryApi, ModelsApi, ArtifactsApi):
    """Typed access to one Polyaxon project for the bot."""
