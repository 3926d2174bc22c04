"""Lint the trainer Dockerfile (no Docker engine runs here): parse its instructions and check the conventions."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.trainer.runs import REPO

DOCKERFILE = REPO / "trainer" / "Dockerfile"


def instructions(path: Path) -> list[tuple[str, str]]:
    """Return (INSTRUCTION, arguments) pairs, joining continuation lines and dropping comments."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, rest = full.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    assert not pending, "dangling line continuation"
    return result


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, str]]:
    """The Dockerfile's instructions."""
    return instructions(DOCKERFILE)


def test_known_instructions_only(parsed: list[tuple[str, str]]) -> None:
    known = {"ARG", "FROM", "ENV", "RUN", "WORKDIR", "COPY", "USER", "ENTRYPOINT", "CMD", "LABEL"}
    assert {keyword for keyword, _ in parsed} <= known


def test_base_image_is_cuda_and_pinnable_by_digest(parsed: list[tuple[str, str]]) -> None:
    args = dict(rest.split("=", 1) for keyword, rest in parsed if keyword == "ARG" and "=" in rest)
    froms = [rest for keyword, rest in parsed if keyword == "FROM"]
    assert froms == ["${BASE_IMAGE}"]
    assert args["BASE_IMAGE"].startswith("nvidia/cuda:")
    assert ":latest" not in args["BASE_IMAGE"]
    text = DOCKERFILE.read_text()
    assert "Digest-pin convention" in text
    assert re.search(r"BASE_IMAGE=nvidia/cuda:[\w.\-]+@sha256:<digest>", text)


def test_python_packages_are_pinned(parsed: list[tuple[str, str]]) -> None:
    packages = []
    for keyword, rest in parsed:
        if keyword != "RUN":
            continue
        for command in rest.split("&&"):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"]:
                packages += [w for w in words[2:] if not w.startswith("-") and w != "."]
    assert "torch==2.13.0" in packages
    assert {p.split("==")[0] for p in packages} >= {"transformers", "trl", "peft", "datasets", "accelerate", "polyaxon"}
    unpinned = [p for p in packages if "==" not in p]
    assert unpinned == []


def test_installs_the_trainer_and_runs_it_unprivileged(parsed: list[tuple[str, str]]) -> None:
    copies = [rest for keyword, rest in parsed if keyword == "COPY"]
    assert "trainer/ ./trainer/" in copies
    users = [rest for keyword, rest in parsed if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    entrypoint = [rest for keyword, rest in parsed if keyword == "ENTRYPOINT"]
    assert entrypoint == ['["python", "-m", "trainer"]']
