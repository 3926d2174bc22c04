"""What a run's card shows besides the run's own row: its parent (a resume, an earlier attempt), and whether
Polyaxon is answering. The reads the card needs, apart from the thread's posting (bot.runs.thread)."""

from __future__ import annotations

from bot.runs.card import OUTAGE_SERVICE, CardView, card_view, outage_line, polyaxon_url
from bot.runs.deps import RunDeps
from bot.slack.threads import permalink
from storage import repos
from storage.models import Run


def card_content(deps: RunDeps, run: Run) -> CardView:
    """The card's content for a stored run."""
    parent_name, parent_link, previous_failure = parent_context(deps, run)
    return card_view(
        run,
        polyaxon_url=polyaxon_url(deps.settings.polyaxon, run),
        parent_name=parent_name,
        parent_link=parent_link,
        recipe_presets=recipe_presets(deps, run),
        previous_failure=previous_failure,
        now=deps.clock(),
        outage=outage_note(deps, run),
    )


def recipe_presets(deps: RunDeps, run: Run) -> list[str] | None:
    """The presets the run's recipe gives by default (the card marks the others as chosen); None when the catalog no
    longer has the recipe (nothing is marked)."""
    recipe = deps.catalog.recipes.get(run.recipe_name)
    return list(recipe.spec.presets) if recipe is not None else None


def outage_note(deps: RunDeps, run: Run) -> str | None:
    """The card's line while Polyaxon does not answer (bot.watch.outage told it): active runs only."""
    if run.status in repos.TERMINAL_STATUSES:
        return None
    with deps.sessions() as s:
        outage = repos.current_outage(s, service=OUTAGE_SERVICE)
        if outage is None or outage.told_at is None:
            return None
        return outage_line(outage.host, outage.since)


def parent_context(deps: RunDeps, run: Run) -> tuple[str | None, str | None, str | None]:
    """A resumed run's parent on its card: the parent's name and link, or, for an attempt of a retried run (which
    shares the parent's card), what ended the previous attempt."""
    if run.parent_run_id is None:
        return None, None, None
    with deps.sessions() as s:
        parent = repos.get_run(s, run_id=run.parent_run_id)
    if parent is None:
        return None, None, None
    if parent.card_ts != run.card_ts:
        return parent.name, permalink(deps.client, parent.channel, parent.card_ts), None
    previous = str(parent.failure.get("title") or "") if parent.failure else None
    return parent.name, None, previous
