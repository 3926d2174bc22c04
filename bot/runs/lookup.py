"""The one way to resolve a RUN reference: a Polyaxon uuid, its first 8 characters, or a run name."""

from __future__ import annotations

import difflib

from bot.runs.errors import RunError
from storage import repos
from storage.db import SessionFactory
from storage.models import Run


def find_run(sessions: SessionFactory, ref: str) -> Run:
    """The run a user means by a uuid, its first 8 characters, or a name; RunError with close names."""
    with sessions() as s:
        matches = list(repos.find_runs(s, ref=ref))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            listed = ", ".join(f"`{r.name}`" for r in matches[:5])
            raise RunError(f"{ref!r} matches several runs ({listed}); use the full run name or uuid")
        names = [r.name for r in repos.list_recent_runs(s, limit=200)]
    close = difflib.get_close_matches(ref, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `/finetune status` lists your active runs"
    raise RunError(f"no run {ref!r}{hint}", suggestions=close)
