"""Pieces of the local executor that need no server: file mirroring, interpreter shims, settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from bot.local.polyaxon.config import AgentSettings, LocalConnection, StackLayout
from bot.local.polyaxon.procs import kill_recorded_group, start_ticks
from bot.local.polyaxon.steps.init import write_shims
from bot.local.polyaxon.steps.sync import mirror_tree


def test_mirror_copies_new_and_changed_files_only(tmp_path: Path) -> None:
    src, dst = tmp_path / "ctx", tmp_path / "store"
    (src / "outputs" / "ckpt").mkdir(parents=True)
    (src / "outputs" / "ckpt" / "model.bin").write_bytes(b"v1")
    (src / "events").mkdir()
    (src / "events" / "loss.plx").write_text("a")
    assert mirror_tree(src, dst) == 2
    assert (dst / "outputs" / "ckpt" / "model.bin").read_bytes() == b"v1"
    assert mirror_tree(src, dst) == 0  # unchanged: nothing copied again
    (src / "events" / "loss.plx").write_text("ab")
    assert mirror_tree(src, dst) == 1
    assert (dst / "events" / "loss.plx").read_text() == "ab"


def test_mirror_never_copies_logs_back_over_the_live_log(tmp_path: Path) -> None:
    src, dst = tmp_path / "ctx", tmp_path / "store"
    (src / "plxlogs").mkdir(parents=True)
    (src / "plxlogs" / "logs.jsonl").write_text("stale copy")
    (dst / "plxlogs").mkdir(parents=True)
    (dst / "plxlogs" / "logs.jsonl").write_text("live")
    assert mirror_tree(src, dst) == 0
    assert (dst / "plxlogs" / "logs.jsonl").read_text() == "live"


def test_mirror_of_a_missing_folder_is_a_no_op(tmp_path: Path) -> None:
    assert mirror_tree(tmp_path / "absent", tmp_path / "store") == 0


def test_python_shims_run_the_configured_interpreter(tmp_path: Path) -> None:
    write_shims(tmp_path, sys.executable)
    for name in ("python", "python3"):
        out = subprocess.run(
            [name, "-c", "import sys; print(sys.executable, sys.prefix)"],
            env={"PATH": f"{tmp_path}{os.pathsep}/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert out == [sys.executable, sys.prefix]  # same interpreter, same venv


def test_agent_settings_round_trip() -> None:
    settings = AgentSettings(host="http://127.0.0.1:1", store="/s", python="/p", workdir="/w", extra_env={"A": "1"})
    assert AgentSettings.from_json(settings.to_json()) == settings
    assert settings.layout == StackLayout(Path("/s"))


def test_connections_map_to_host_folders() -> None:
    spec = LocalConnection("model-cache", Path("/data/models")).to_polyaxon()
    assert spec == {
        "name": "model-cache",
        "kind": "host_path",
        "schema": {"hostPath": "/data/models", "mountPath": "/data/models"},
    }


def test_a_recorded_group_is_killed_only_if_its_pid_was_not_reused() -> None:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks = start_ticks(proc.pid)
        assert ticks is not None
        assert not kill_recorded_group(proc.pid, ticks + 1, signal.SIGKILL)  # someone else's process now
        assert proc.poll() is None
        assert kill_recorded_group(proc.pid, ticks, signal.SIGKILL)
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
    assert start_ticks(proc.pid) is None


def test_the_polyaxon_shim_answers_fswatch_and_runs_polyaxons_cli_for_everything_else(tmp_path: Path) -> None:
    shims, context = tmp_path / "shims", tmp_path / "context"
    (context / "artifacts").mkdir(parents=True)
    write_shims(shims, sys.executable)
    env = {"PATH": f"{shims}{os.pathsep}/usr/bin:/bin", "POLYAXON_CONTEXT_ROOT": str(context), "HOME": str(tmp_path)}
    init = {**env, "POLYAXON_SERVICE": "init", "POLYAXON_NO_CONFIG": "true"}
    # What the auto-resume init step runs after copying a run's earlier files: nothing here reads its list.
    fswatch = subprocess.run(
        ["polyaxon", "initializer", "fswatch", f"--path={context / 'artifacts' / 'run'}"],
        env=init,
        capture_output=True,
        text=True,
    )
    assert fswatch.returncode == 0, fswatch.stderr
    assert list((context / "artifacts").iterdir()) == []  # no `.fs` written
    # Any other call is Polyaxon's CLI with its arguments and exit status.
    listed = subprocess.run(["polyaxon", "initializer", "--help"], env=init, capture_output=True, text=True)
    assert listed.returncode == 0 and "fswatch" in listed.stdout and "Usage: polyaxon initializer" in listed.stdout
    unknown = subprocess.run(["polyaxon", "no-such-command"], env=init, capture_output=True, text=True)
    assert unknown.returncode == 2 and "No such command 'no-such-command'" in unknown.stderr, unknown.stderr
