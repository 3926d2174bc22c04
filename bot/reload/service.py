"""The catalog reloads itself: a change under `FINETUNE_CATALOG_DIR` (a team's git repository, a ConfigMap, a
git-sync sidecar) is noticed within a poll, the whole new catalog is loaded and checked first, then swapped in at
once (`Catalog.adopt`: every holder plans from it, a plan being compiled finishes on the old one; runs already
planned keep their compiled plans). A change that does not load keeps the old catalog in force: the log says why,
and `recipes` shows one line with when and why."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bot.catalog import Catalog, CatalogError
from bot.catalog.datasets import RowCache
from bot.reload.revision import fingerprint, revision

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reloaded:
    """What one poll did: `unchanged`, `reloaded` (to `revision`) or `refused` (with `why`)."""

    outcome: str
    revision: str | None = None
    why: str | None = None


class CatalogReloader:
    """Polls the catalog folder and swaps a valid new catalog into the one every service holds."""

    def __init__(self, catalog: Catalog, *, rows: RowCache, clock: Callable[[], datetime]) -> None:
        self.catalog = catalog
        self.rows = rows
        self.clock = clock
        self._lock = threading.Lock()
        self._seen = fingerprint(self._folders())
        if catalog.revision is None:
            catalog.revision = revision(catalog.root, rows)
            catalog.loaded_at = clock()

    def _folders(self) -> list[Path]:
        """The catalog folder and the local dataset folders its recipes name outside it."""
        outside = [
            self.catalog.repo_root / entry.spec.path
            for entry in self.catalog.recipe_data.values()
            if entry.spec.path is not None
            and not (self.catalog.repo_root / entry.spec.path).is_relative_to(self.catalog.root)
        ]
        return [self.catalog.root, *outside]

    def poll(self) -> Reloaded:
        """One look at the folder: load and swap in a changed catalog, or keep the old one and say why."""
        with self._lock:
            now_seen = fingerprint(self._folders())
            if now_seen == self._seen:
                return Reloaded("unchanged", self.catalog.revision)
            self._seen = now_seen
            try:
                newer = Catalog.load(self.catalog.root, rows=self.rows)
            except (CatalogError, OSError, UnicodeError, ValueError) as exc:
                why = str(exc)
                self.catalog.refused = (self.clock(), why)
                log.warning("catalog change refused; %s stays in force: %s", self.catalog.revision, why)
                return Reloaded("refused", self.catalog.revision, why)
            newer.revision = revision(newer.root, self.rows)
            newer.loaded_at = self.clock()
            before = self.catalog.revision
            self.catalog.adopt(newer)
            log.info("catalog reloaded: %s -> %s (%d recipes)", before, newer.revision, len(newer.recipes))
            return Reloaded("reloaded", newer.revision)
