"""The trainer's termination message: what a job that ends on an exception leaves where kubelet reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer.termination import MAX_BYTES, PATH_ENV, last_word, tell


def test_an_exception_that_ends_the_job_is_its_termination_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = tmp_path / "termination-log"
    monkeypatch.setenv(PATH_ENV, str(message))
    with pytest.raises(ValueError), last_word():
        raise ValueError("dataset split 'eval' is missing")
    assert message.read_text() == "ValueError: dataset split 'eval' is missing\n"


def test_an_exit_code_the_job_chose_keeps_what_it_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = tmp_path / "termination-log"
    monkeypatch.setenv(PATH_ENV, str(message))
    with pytest.raises(SystemExit), last_word():
        tell("cannot resume: checkpoint-40 is incomplete")
        sys.exit(3)
    assert message.read_text() == "cannot resume: checkpoint-40 is incomplete\n"


def test_a_long_message_fits_what_kubelet_keeps_and_a_missing_mount_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = tmp_path / "termination-log"
    monkeypatch.setenv(PATH_ENV, str(message))
    tell("x" * 10_000)
    assert len(message.read_bytes()) <= MAX_BYTES
    monkeypatch.setenv(PATH_ENV, str(tmp_path / "no" / "such" / "folder" / "termination-log"))
    tell("nowhere to write: the log's last lines are the fallback")  # does not raise


def test_the_trainer_s_own_entry_point_writes_it(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    code = (
        "import sys; sys.argv = ['trainer', '--config', '/no/such/recipe.yaml']; "
        "from trainer.__main__ import run; run()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"PATH": "/usr/bin:/bin", PATH_ENV: str(message), "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    said = message.read_text()
    assert "Error" in said and "/no/such/recipe.yaml" in said, (said, proc.stderr[-2000:])
