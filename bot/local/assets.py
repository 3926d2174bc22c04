"""Local models and datasets built on first use of the recipe that names them, not at every start.

Recipes that train on local paths (`sft-tiny`'s tiny Llama, the SmolLM2 135M conversion) say how to build
what is missing (`build:` in the recipe). The shell builds it just before sending the first
`/finetune run recipe=R …` that needs it; a build that fails is said in one line and the command still goes
to the bot, which answers that the model or dataset is missing.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.catalog import Catalog
from bot.grammar import CommandError, RunCommand, parse_command

_log = logging.getLogger(__name__)

BUILD_TIMEOUT_S = 900.0
LAST_LINE_CHARS = 160


@dataclass(frozen=True)
class LocalBuild:
    """A local model or dataset a recipe names, and the command that builds it."""

    recipe: str
    what: str  # "model" or "dataset"
    path: str
    command: str


def recipe_named(text: str) -> str | None:
    """The recipe a `/finetune` command's text runs (`run recipe=R …`), or None."""
    try:
        command = parse_command(text)
    except CommandError:
        return None  # the bot explains the mistake
    return command.recipe if isinstance(command, RunCommand) else None


def missing_builds(catalog: Catalog, recipe: str) -> list[LocalBuild]:
    """What `recipe` needs built that is not there yet (nothing for an unknown recipe)."""
    found = catalog.recipes.get(recipe)
    if found is None:
        return []
    builds: list[LocalBuild] = []
    for what, ref in (("model", found.spec.model), ("dataset", found.spec.dataset)):
        if ref is None or ref.path is None or ref.build is None:
            continue
        path = Path(ref.path)
        if not (path if path.is_absolute() else catalog.repo_root / path).exists():
            builds.append(LocalBuild(recipe, what, ref.path, ref.build))
    return builds


class RecipeAssets:
    """Builds what a recipe needs the first time a command names it; each build is tried once per session."""

    def __init__(self, catalog: Catalog, say: Callable[[str], None], *, timeout_s: float = BUILD_TIMEOUT_S) -> None:
        self.catalog = catalog
        self.say = say
        self.timeout_s = timeout_s
        self._tried: set[str] = set()

    def prepare(self, text: str) -> None:
        """Before `/finetune <text>` is sent: build what its recipe needs and is missing."""
        recipe = recipe_named(text)
        if recipe is None:
            return
        for build in missing_builds(self.catalog, recipe):
            if build.command not in self._tried:
                self._tried.add(build.command)
                self.build(build)

    def build(self, build: LocalBuild) -> bool:
        """Run one build command (`python` is this interpreter) in the repository root; whether it worked."""
        self.say(
            f"{build.recipe} needs its {build.what} {build.path}, not built yet: building it now, once "
            f"(`{build.command}`; from a few seconds for a tiny model to a few minutes for a download)…"
        )
        argv = shlex.split(build.command)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv, cwd=self.catalog.repo_root, capture_output=True, text=True, timeout=self.timeout_s
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.say(f"could not build {build.path} ({_clip(str(exc))}); sending the command anyway")
            return False
        _log.info("build %r exited %s:\n%s%s", build.command, done.returncode, done.stdout, done.stderr)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
            self.say(f"could not build {build.path} ({_clip(last)}); sending the command anyway")
            return False
        self.say(f"built {build.path} in {time.monotonic() - started:.0f} s")
        return True


def _clip(text: str) -> str:
    return text if len(text) <= LAST_LINE_CHARS else text[: LAST_LINE_CHARS - 1] + "…"
