"""Fork servers: a Python job forked from a preloaded interpreter behaves as one started fresh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon.procs import group_alive
from bot.local.polyaxon.steps.forked import MAX_SERVERS, ForkedProcess, ForkServers, env_key, python_args
from tests.fixtures.slack import wait_for

PY = sys.executable


@pytest.fixture
def forks(tmp_path: Path) -> Iterator[ForkServers]:
    servers = ForkServers(PY, ["json", "email.mime.text"], tmp_path / "homes")
    yield servers
    servers.close()


def job_env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home-a"),
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONUNBUFFERED": "1",
        "POLYAXON_RUN_UUID": "aaaa",
        **more,
    }


def fork(forks: ForkServers, argv: list[str], env: dict[str, str], cwd: Path) -> ForkedProcess:
    """The job, forked: the first job of an environment starts its server and waits for it to be ready."""
    proc = forks.start(argv, env, str(cwd))
    assert isinstance(proc, ForkedProcess)
    return proc


def output(proc: ForkedProcess) -> str:
    assert proc.stdout is not None
    return proc.stdout.read().decode()


def test_only_python_module_or_code_commands_can_be_forked() -> None:
    interpreters = {"python", PY}
    assert python_args(["python", "-m", "trainer", "--x", "1"], interpreters) == ["-m", "trainer", "--x", "1"]
    assert python_args([PY, "-u", "-c", "print(1)"], interpreters) == ["-u", "-c", "print(1)"]
    assert python_args(["python", "script.py"], interpreters) is None
    assert python_args(["python", "-X", "importtime", "-m", "trainer"], interpreters) is None
    assert python_args(["torchrun", "-m", "trainer"], interpreters) is None
    assert python_args(["/usr/bin/python9", "-m", "trainer"], interpreters) is None


def test_home_and_polyaxon_variables_do_not_split_servers_but_anything_else_does(tmp_path: Path) -> None:
    env = job_env(tmp_path)
    other_run = {**env, "HOME": "/elsewhere", "POLYAXON_RUN_UUID": "bbbb"}
    assert env_key(env, "/w") == env_key(other_run, "/w")
    # Each job's own termination-message file (kubelet's /dev/termination-log here) does not split them either: a
    # server per run would cost every job the libraries' import again.
    with_message = {**env, "FINETUNE_TERMINATION_LOG": "/homes/aaaa/termination-log"}
    assert env_key(with_message, "/w") == env_key({**with_message, "FINETUNE_TERMINATION_LOG": "/homes/bbbb/t"}, "/w")
    assert env_key(with_message, "/w") == env_key(env, "/w")
    assert env_key(env, "/w") != env_key({**env, "HF_HUB_OFFLINE": "1"}, "/w")
    assert env_key(env, "/w") != env_key(env, "/v")
    # Without HF_HOME the Hugging Face libraries would derive their caches from the server's HOME.
    assert env_key({k: v for k, v in env.items() if k != "HF_HOME"}, "/w") is None


def test_a_forked_job_has_its_own_session_env_folder_argv_and_streams(forks: ForkServers, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    code = (
        "import os, sys, json; "
        "print(json.dumps([os.getpid(), os.getpgid(0), os.getsid(0), os.getcwd(), os.environ['HOME'], "
        "os.environ.get('POLYAXON_RUN_UUID'), sys.argv, sys.path[0], sys.stdin.read()])); "
        "print('to stderr', file=sys.stderr)"
    )
    proc = fork(forks, ["python", "-c", code, "a", "b"], job_env(tmp_path, HOME="/h/run-1"), cwd)
    text = output(proc)
    assert proc.wait(timeout=30) == 0
    first, second = text.splitlines()
    pid, pgid, sid, folder, home, run, argv, path0, stdin = json.loads(first)
    assert pid == proc.pid == pgid == sid  # a session and process group of its own, as start_new_session gives
    assert (folder, home, run) == (str(cwd), "/h/run-1", "aaaa")
    assert argv == ["-c", "a", "b"] and path0 == "" and stdin == ""
    assert second == "to stderr"  # one pipe for both streams


def test_a_forked_job_collects_only_its_own_objects(forks: ForkServers, tmp_path: Path) -> None:
    # The preloaded modules' objects are frozen before the fork (a full collection in the job skips them); the
    # job's own garbage, a cycle here, is still collected.
    code = (
        "import gc, json, sys; "
        "frozen = gc.get_freeze_count(); "
        "ns = sys.modules['json'].__dict__; "
        "preloaded = gc.is_tracked(ns) and not any(o is ns for o in gc.get_objects()); "
        "a = []; a.append(a); del a; "
        "print(json.dumps([frozen, preloaded, gc.collect()]))"
    )
    proc = fork(forks, ["python", "-c", code], job_env(tmp_path), tmp_path)
    text = output(proc)
    assert proc.wait(timeout=30) == 0, text
    frozen, preloaded_frozen, collected = json.loads(text)
    assert frozen > 1000 and preloaded_frozen, text
    assert collected >= 1, text


def test_a_module_job_runs_as_main_with_exit_codes_tracebacks_and_atexit(forks: ForkServers, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "jobmod.py").write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "print(__name__, sys.argv[1:])\n"
        "if sys.argv[1] == 'boom':\n"
        "    raise ValueError('the job failed')\n"
        "raise SystemExit(int(sys.argv[1]))\n"
    )
    env = job_env(tmp_path)
    ok = fork(forks, ["python", "-m", "jobmod", "0"], env, cwd)
    assert output(ok).splitlines() == ["__main__ ['0']", "atexit ran"]
    assert ok.wait(timeout=30) == 0
    three = fork(forks, ["python", "-u", "-m", "jobmod", "3", "-u"], env, cwd)
    assert output(three).splitlines()[0] == "__main__ ['3', '-u']"  # the job's own `-u` is its argument
    assert three.wait(timeout=30) == 3
    boom = fork(forks, ["python", "-m", "jobmod", "boom"], env, cwd)
    text = output(boom)
    assert boom.wait(timeout=30) == 1
    assert "Traceback (most recent call last)" in text and text.rstrip().endswith("atexit ran")
    assert "ValueError: the job failed" in text


def test_a_signalled_job_reports_the_signal_as_popen_does(forks: ForkServers, tmp_path: Path) -> None:
    proc = fork(
        forks, ["python", "-c", "import time; print('up', flush=True); time.sleep(60)"], job_env(tmp_path), tmp_path
    )
    # The pid is told once the job leads its own process group: a stop sent at once reaches the whole group.
    assert os.getpgid(proc.pid) == proc.pid
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"up\n"
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert proc.poll() == -signal.SIGTERM


def test_another_environment_gets_another_server(forks: ForkServers, tmp_path: Path) -> None:
    first = fork(forks, ["python", "-c", "import os; print(os.getppid())"], job_env(tmp_path), tmp_path)
    other = fork(forks, ["python", "-c", "import os; print(os.getppid())"], job_env(tmp_path, OTHER="1"), tmp_path)
    assert int(output(first)) != int(output(other))


def test_jobs_die_with_their_server_and_the_next_job_gets_a_new_one(forks: ForkServers, tmp_path: Path) -> None:
    env = job_env(tmp_path)
    argv = ["python", "-c", "import os, time; print(os.getppid(), flush=True); time.sleep(60)"]
    proc = fork(forks, argv, env, tmp_path)
    assert proc.stdout is not None
    server = int(proc.stdout.readline())
    os.kill(server, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    wait_for(lambda: not group_alive(proc.pid) or None, timeout=10)
    again = fork(forks, argv, env, tmp_path)
    assert again.stdout is not None
    assert int(again.stdout.readline()) != server
    os.killpg(again.pid, signal.SIGKILL)
    assert again.wait(timeout=30) == -signal.SIGKILL


def test_a_server_that_cannot_preload_leaves_every_job_to_a_fresh_process(tmp_path: Path) -> None:
    forks = ForkServers(PY, ["no_such_module_anywhere"], tmp_path / "homes")
    try:
        env = job_env(tmp_path)
        # The job waits for the server it started, which fails its preload: the job starts fresh.
        assert forks.start(["python", "-c", "pass"], env, str(tmp_path)) is None
        assert env_key(env, str(tmp_path)) in forks.failed
        # It would fail the same way again: no other server is started for that environment, and nothing forks.
        assert forks.start(["python", "-c", "pass"], env, str(tmp_path)) is None
        assert forks.started == 1
    finally:
        forks.close()


def test_close_stops_and_reaps_every_server(tmp_path: Path) -> None:
    forks = ForkServers(PY, ["json"], tmp_path / "homes")
    proc = fork(forks, ["python", "-c", "import os; print(os.getppid())"], job_env(tmp_path), tmp_path)
    server = int(output(proc))
    assert proc.wait(timeout=30) == 0
    forks.close()
    # Reaped, not a zombie: a zombie keeps its /proc entry until its parent waits for it.
    assert not Path(f"/proc/{server}").exists()


def test_a_server_let_go_for_newer_environments_lets_its_job_finish(forks: ForkServers, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    code = f"import os, time; print('up', flush=True)\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.05)"
    first = fork(forks, ["python", "-c", code], job_env(tmp_path), tmp_path)
    assert first.stdout is not None and first.stdout.readline() == b"up\n"
    for n in range(MAX_SERVERS):  # as many newer environments as servers are kept: the first one is let go
        done = fork(forks, ["python", "-c", "pass"], job_env(tmp_path, OTHER=str(n)), tmp_path)
        assert done.wait(timeout=30) == 0
    # The first environment's server is gone from the table (a new job there starts a new server)...
    assert forks.start(["python", "-c", "pass"], job_env(tmp_path), str(tmp_path), wait_s=0) is None
    # ...but its running job was not killed: it ends on its own, and its exit code is told.
    assert first.poll() is None
    flag.touch()
    assert first.wait(timeout=30) == 0


def test_a_job_that_will_not_wait_for_a_preloading_server_starts_fresh(forks: ForkServers, tmp_path: Path) -> None:
    env = job_env(tmp_path)
    assert forks.start(["python", "-c", "pass"], env, str(tmp_path), wait_s=0) is None  # the server starts
    proc = wait_for(lambda: forks.start(["python", "-c", "pass"], env, str(tmp_path), wait_s=0), timeout=60)
    assert isinstance(proc, ForkedProcess) and proc.wait(timeout=30) == 0
