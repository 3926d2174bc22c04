"""Shared fixtures of the catalog tests: a copy of the shipped catalog, loaded once per module, or private."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.catalog import Catalog
from tests.manifests.catalog_repo import make_repo


@pytest.fixture(scope="module")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped catalog with a tiny model folder, shared by the read-only tests."""
    return make_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def catalog(catalog_dir: Path) -> Catalog:
    """The shipped catalog, loaded once."""
    return Catalog.load(catalog_dir)


@pytest.fixture
def fresh_dir(tmp_path: Path) -> Path:
    """A private copy of the catalog that a test may edit."""
    return make_repo(tmp_path / "repo")
