"""Supervisor of the local Polyaxon stack: the haupt sandbox API server plus the local process agent."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from bot.local.polyaxon import leftovers
from bot.local.polyaxon.config import (
    AGENT_SETTINGS_ENV,
    DEFAULT_PRELOAD,
    AgentSettings,
    LocalConnection,
    StackLayout,
    artifacts_store_connection,
    default_connections,
    job_passthrough,
)
from bot.local.polyaxon.procs import die_with_parent

_log = logging.getLogger(__name__)


class StackError(RuntimeError):
    """The local stack could not start."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked; the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api_is_up(host: str, timeout_s: float = 2.0) -> bool:
    """Whether the Polyaxon API answers (`/healthz` and one API route)."""
    try:
        with urllib.request.urlopen(f"{host}/healthz", timeout=timeout_s) as response:
            if response.status != 200:
                return False
        with urllib.request.urlopen(f"{host}/api/v1/orgs/default/agents/state", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


def port_in_use(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM a child's process group, SIGKILL it after `grace_s`."""
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _log.warning("pid %s ignored SIGTERM for %.0f s: SIGKILL", proc.pid, grace_s)
    # Whatever the leader did, nothing of its group may survive it.
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class LocalPolyaxonStack:
    """Starts, watches and stops the sandbox server and the local agent on one store folder."""

    def __init__(
        self,
        store: Path,
        *,
        port: int | None = None,
        connections: Sequence[LocalConnection] | None = None,
        python: str | None = None,
        workdir: Path | None = None,
        stop_grace_s: float = 10.0,
        sync_interval_s: float = 3.0,
        startup_timeout_s: float = 120.0,
        extra_job_env: dict[str, str] | None = None,
        agent: bool = True,
        preload: Sequence[str] = DEFAULT_PRELOAD,
    ) -> None:
        self.store = Path(store).resolve()
        self.layout = StackLayout(self.store)
        self.port = port
        self.connections = list(connections) if connections is not None else default_connections(self.layout)
        self.python = python or sys.executable
        self.workdir = Path(workdir or os.getcwd()).resolve()
        self.stop_grace_s = stop_grace_s
        self.sync_interval_s = sync_interval_s
        self.startup_timeout_s = startup_timeout_s
        self.extra_job_env = dict(extra_job_env or {})
        # Python jobs fork from an interpreter that imported these (`steps.forked`); empty: every job starts cold.
        self.preload = list(preload)
        # Without the agent nothing executes: a submitted run stays queued (benchmarks of the bot alone).
        self.with_agent = agent
        self.agent_restarts = 0
        self.server_restarts = 0
        self._server: subprocess.Popen[bytes] | None = None
        self._agent: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._lock = threading.Lock()
        # What start found left running on the store by an earlier session and stopped, one line each.
        self.leftovers_stopped: list[str] = []

    # Public API -----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The API's base URL, e.g. `http://127.0.0.1:8123`."""
        if self.port is None:
            raise StackError("The stack is not started.")
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Variables a client process needs to reach this stack (what `serve` reads)."""
        return {"POLYAXON_HOST": self.host, "POLYAXON_NO_CONFIG": "true"}

    @property
    def server_pid(self) -> int | None:
        """Pid of the API server (None when not running)."""
        return self._server.pid if self._server and self._server.poll() is None else None

    @property
    def agent_pid(self) -> int | None:
        """Pid of the agent (None when not running)."""
        return self._agent.pid if self._agent and self._agent.poll() is None else None

    def start(self) -> LocalPolyaxonStack:
        """Start the server, wait until the API answers, start the agent (unless `agent=False`) and the watcher."""
        for folder in (self.store, self.layout.logs, self.layout.server_home, self.layout.context_root):
            folder.mkdir(parents=True, exist_ok=True)
        for connection in self.connections:
            connection.host_path.mkdir(parents=True, exist_ok=True)
        try:
            self.leftovers_stopped = leftovers.clear(self.layout, self.store)
        except leftovers.StoreInUseError as exc:
            raise StackError(str(exc)) from exc
        if self.port is None:
            self.port = free_port()
        elif port_in_use(self.port):
            raise StackError(f"port {self.port} is already in use by another process: pick another --port")
        self._stopping.clear()
        try:
            self._start_server()
            self._wait_for_api()
            if self.with_agent:
                self._start_agent()
        except BaseException:
            self.stop()
            raise
        self._watcher = threading.Thread(target=self._watch, name="local-polyaxon-watcher", daemon=True)
        self._watcher.start()
        return self

    def stop(self) -> None:
        """Stop the agent (which stops its runs), any job group left, then the server."""
        self._stopping.set()
        with self._lock:
            if self._agent is not None:
                _stop_group(self._agent, grace_s=self.stop_grace_s + 15)
                self._agent = None
                leftovers.forget(self.layout.local, "agent")
            leftovers.kill_jobs(self.layout.jobs, drop_records=True)
            if self._server is not None:
                _stop_group(self._server, grace_s=15)
                self._server = None
                leftovers.forget(self.layout.local, "server")
        # Only now: a process the watcher restarted dies with the watcher's thread (parent-death signal), so the
        # thread must outlive the orderly stop above.
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=5)

    def wait_for_agent_restart(self, previous_pid: int, timeout_s: float = 60.0) -> int:
        """Block until the watcher has replaced agent `previous_pid`; return the new pid."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid = self.agent_pid
            if pid is not None and pid != previous_pid:
                return pid
            time.sleep(0.2)
        raise StackError(f"the agent (pid {previous_pid}) was not restarted within {timeout_s:.0f} s")

    def __enter__(self) -> LocalPolyaxonStack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # Internals ------------------------------------------------------------------------------

    def _polyaxon_env(self) -> dict[str, str]:
        """Variables shared by server and agent: context root and the declared connections."""
        return {
            "POLYAXON_NO_CONFIG": "true",
            "POLYAXON_CONTEXT_ROOT": str(self.layout.context_root),
            "POLYAXON_AGENT_ARTIFACTS_STORE": json.dumps(artifacts_store_connection(self.layout).to_polyaxon()),
            "POLYAXON_AGENT_CONNECTIONS": json.dumps([c.to_polyaxon() for c in self.connections]),
            "POLYAXON_ARTIFACTS_STORE_NAME": artifacts_store_connection(self.layout).name,
        }

    def _base_env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
        env = {name: os.environ[name] for name in keep if name in os.environ}
        env.update(self._polyaxon_env())
        return env

    def _start_server(self) -> None:
        env = self._base_env()
        # haupt writes a home config under $HOME: keep it inside the store.
        env["HOME"] = str(self.layout.server_home)
        log = (self.layout.logs / "server.log").open("ab")
        argv = [
            self.python, "-m", "haupt", "sandbox", "start",
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1", "--path", str(self.store),
        ]  # fmt: skip
        self._server = subprocess.Popen(
            argv,
            env=env,
            cwd=self.store,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # a SIGKILL of this process must not leave the server behind
        )
        log.close()
        leftovers.record(self.layout.local, "server", self._server.pid, port=self.port)

    def _wait_for_api(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._server is None or self._server.poll() is not None:
                raise StackError(f"the Polyaxon server exited during startup:\n{self._log_tail('server.log')}")
            if api_is_up(self.host):
                return
            time.sleep(0.3)
        raise StackError(
            f"the Polyaxon API did not answer within {self.startup_timeout_s:.0f} s:\n{self._log_tail('server.log')}"
        )

    def _agent_settings(self) -> AgentSettings:
        return AgentSettings(
            host=self.host,
            store=str(self.store),
            python=self.python,
            workdir=str(self.workdir),
            stop_grace_s=self.stop_grace_s,
            sync_interval_s=self.sync_interval_s,
            extra_env=self.extra_job_env,
            preload=self.preload,
        )

    def _start_agent(self) -> None:
        env = self._base_env()
        # Variables a job may inherit (model caches, offline switches, thread counts) pass through the agent.
        env.update(job_passthrough(os.environ))
        env["HOME"] = str(self.layout.server_home)
        env["POLYAXON_HOST"] = self.host
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])
        env[AGENT_SETTINGS_ENV] = self._agent_settings().to_json()
        log = (self.layout.logs / "agent.log").open("ab")
        self._agent = subprocess.Popen(
            [self.python, "-m", "bot.local.polyaxon.agent"],
            env=env,
            cwd=self.store,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # the agent (and through it its jobs) dies with this process
        )
        log.close()
        leftovers.record(self.layout.local, "agent", self._agent.pid)

    def _watch(self) -> None:
        """Restart the agent when it dies, and the server when it dies (same port, same store)."""
        backoff = 1.0
        while not self._stopping.wait(0.5):
            with self._lock:
                if self._stopping.is_set():
                    return
                if self._server is not None and self._server.poll() is not None:
                    _log.warning("Polyaxon server exited with %s: restarting", self._server.returncode)
                    self._server = None
                    self.server_restarts += 1
                    self._start_server()
                if self._agent is not None and self._agent.poll() is not None:
                    _log.warning("local agent exited with %s: restarting", self._agent.returncode)
                    self._agent = None
                    leftovers.kill_jobs(self.layout.jobs, drop_records=False)
                    time.sleep(min(backoff, 10.0))
                    backoff = min(backoff * 2, 10.0)
                    if self._stopping.is_set():
                        return
                    self.agent_restarts += 1
                    self._start_agent()
                elif self._agent is not None:
                    backoff = 1.0

    def _log_tail(self, name: str, lines: int = 30) -> str:
        path = self.layout.logs / name
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
