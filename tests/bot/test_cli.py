"""The console script: db upgrade is real, serve/local refuse an un-migrated database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from storage.migrate import head_revision


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("FINETUNE_DATABASE_URL", url)
    monkeypatch.setenv("POLYAXON_NO_CONFIG", "true")
    return {"FINETUNE_DATABASE_URL": url}


@pytest.mark.parametrize("command", ["serve", "local"])
def test_refuses_to_start_on_unmigrated_database(env: dict[str, str], command: str) -> None:
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 1
    assert "the database has no schema; run `finetune-bot db upgrade` first" in result.output


def test_db_upgrade_then_current(env: dict[str, str]) -> None:
    head = head_revision()
    runner = CliRunner()
    first = runner.invoke(main, ["db", "upgrade"])
    assert first.exit_code == 0, first.output
    assert f"upgraded empty database -> {head}" in first.output
    again = runner.invoke(main, ["db", "upgrade"])
    assert f"already at revision {head}" in again.output
    current = runner.invoke(main, ["db", "current"])
    assert f"database: {head}; code: {head}" in current.output


def test_bad_environment_is_a_clear_error(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINETUNE_APPROVAL_QUORUM", "zero")
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code == 1
    assert "FINETUNE_APPROVAL_QUORUM: Input should be a valid integer" in result.output


def test_console_script_help_lists_the_contract() -> None:
    exe = Path(sys.executable).with_name("finetune-bot")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True, timeout=60).stdout
    for command in ("serve", "local", "local-polyaxon", "db", "manifests"):
        assert command in out
