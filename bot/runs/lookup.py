"""The one way to resolve a RUN reference: a Polyaxon uuid, its first 8 characters, or a run name."""

from __future__ import annotations

import difflib

from bot.runs.errors import RunError
from bot.slack.blocks import escape
from storage import repos
from storage.db import SessionFactory
from storage.models import Run

# How many of the newest runs a reference that names none is compared with, and how many a reply lists.
RECENT = 200
SHOWN = 5


def find_run(sessions: SessionFactory, ref: str) -> Run:
    """The run a user means by a uuid, its first 8 characters, or a name; RunError with close names."""
    with sessions() as s:
        matches = list(repos.find_runs(s, ref=ref))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            listed = ", ".join(f"`{escape(r.name)}`" for r in matches[:5])
            raise RunError(f"{escape(repr(ref))} matches several runs ({listed}); use the full run name or uuid")
        names = [r.name for r in repos.list_recent_runs(s, limit=RECENT)]
    begun = [name for name in names if name.startswith(ref)]
    if len(begun) > 1:
        # A prefix (often a recipe's name) is no run's name: picking one of the runs it begins would act on a run
        # the user did not name, so they are listed for the user to choose.
        listed = ", ".join(f"`{escape(name)}`" for name in begun[:SHOWN])
        more = f" and {len(begun) - SHOWN} more" if len(begun) > SHOWN else ""
        raise RunError(
            f"{escape(repr(ref))} is ambiguous: it begins the names of {len(begun)} runs "
            f"({listed}{more}, newest first); give a whole run name, or the first 8 characters of its uuid",
            suggestions=begun[:SHOWN],
        )
    close = begun + [name for name in difflib.get_close_matches(ref, names, n=3, cutoff=0.6) if name not in begun]
    hint = f"; did you mean {escape(', '.join(close))}?" if close else "; `/finetune status` lists your active runs"
    raise RunError(f"no run {escape(repr(ref))}{hint}", suggestions=close)
