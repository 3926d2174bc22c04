"""Python jobs forked from a preloaded interpreter (`forkserver.py`) instead of started cold.

A job's `python -m trainer` spends 6-8 s importing torch, transformers, TRL, datasets and peft before its first
line runs; forked from an interpreter that imported them already it starts in a fraction of a second. A job is
forked only when that changes nothing it could observe:
- its command is `python [-u] -m MODULE ...` or `python [-u] -c CODE ...` on the stack's interpreter;
- its environment equals the one the server imported the libraries under, except for `HOME`, the termination
  message's file and `POLYAXON_*`, which differ per run and which none of the preloaded libraries read at import
  (`HF_HOME` is set for every job, so the Hugging Face libraries do not derive their caches from `HOME`);
- its working folder is the server's.
One server is started per such environment when the agent starts (for the environment its jobs get) or the first
time a job needs one; a job waits for its server to finish preloading (a fresh process would spend that time
importing the same libraries beside it). Anything else, or a server that failed, died or is not ready within
`READY_WAIT_S`, starts the job as a fresh process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import threading
from collections import OrderedDict
from pathlib import Path
from typing import IO

from bot.local.polyaxon.procs import die_with_parent
from bot.local.polyaxon.steps.termination import PATH_ENV as TERMINATION_PATH_ENV

_log = logging.getLogger("bot.local.polyaxon.executor")

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "forkserver.py"
MAX_SERVERS = 2
READY_TIMEOUT_S = 180.0  # a server not ready by then has failed
READY_WAIT_S = 30.0  # how long a job waits for its server to finish preloading before it starts fresh
START_TIMEOUT_S = 30.0

EnvKey = tuple[tuple[tuple[str, str], ...], str]


def python_args(argv: list[str], interpreters: set[str]) -> list[str] | None:
    """What follows the interpreter when `argv` is a command a fork can run, else None."""
    if len(argv) < 3 or argv[0] not in interpreters:
        return None
    args = argv[1:]
    if args[0] == "-u":
        args = args[1:]
    if len(args) < 2 or args[0] not in ("-m", "-c"):
        return None
    return argv[1:]


# Variables that differ per run and that none of the preloaded libraries read at import: the clean HOME, and the
# file kubelet's termination message is read from (`steps.termination`).
PER_RUN = frozenset({"HOME", TERMINATION_PATH_ENV})


def env_key(env: dict[str, str], cwd: str) -> EnvKey | None:
    """The environment a server must have imported under to fork this job; None when no server can."""
    if "HF_HOME" not in env:
        return None
    shared = tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN and not k.startswith("POLYAXON_")))
    return shared, cwd


class ForkedProcess:
    """A job forked by a server, seen as the parts of `subprocess.Popen` the executor uses."""

    def __init__(self, args: list[str], pid: int, answers: socket.socket, stdout: IO[bytes]) -> None:
        self.args = args
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._answers = answers
        self._ended = threading.Event()
        threading.Thread(target=self._await_exit, name=f"forked-{pid}", daemon=True).start()

    def poll(self) -> int | None:
        """The exit code once the job has ended, else None."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; `subprocess.TimeoutExpired` when it has not ended within `timeout`."""
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def _await_exit(self) -> None:
        line = _read_line(self._answers, timeout=None)
        self._answers.close()
        if line is not None and line.startswith("exit "):
            self.returncode = int(line.split()[1])
        else:
            # The server is gone: the kernel killed its jobs with it (PR_SET_PDEATHSIG, SIGKILL).
            self.returncode = -signal.SIGKILL
        self._ended.set()


class ForkServer:
    """One preloaded interpreter for one environment."""

    def __init__(self, python: str, preload: list[str], env: dict[str, str], cwd: str) -> None:
        self._control, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        self.ready = threading.Event()
        self.dead = threading.Event()
        with remote:
            self.proc = subprocess.Popen(
                [python, str(SERVER_SCRIPT), str(remote.fileno()), *preload],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                pass_fds=(remote.fileno(),),
                start_new_session=True,  # no job's process group holds it
                # Spawned by the agent's keeper thread, which lives as long as the agent.
                preexec_fn=die_with_parent(),
            )

    def await_ready(self, timeout: float) -> bool:
        """Wait for the server's `ready` (or its failure), and mark it; whether it is ready."""
        self._control.settimeout(timeout)
        try:
            answer = self._control.recv(4096).decode(errors="replace")
        except OSError as exc:
            answer = f"no answer: {exc!r}"
        if self.dead.is_set():  # closed while it preloaded
            return False
        if answer == "ready":
            _log.info("fork server %s ready", self.proc.pid)
            self.ready.set()
            return True
        _log.warning("fork server %s not ready (%s): its jobs start as fresh processes", self.proc.pid, answer)
        self.close()
        return False

    def start(self, args: list[str], env: dict[str, str], cwd: str) -> ForkedProcess | None:
        """Fork `python ARGS`; None when this server cannot (then it is marked dead)."""
        answers, remote = socket.socketpair()
        read_end, write_end = os.pipe()
        payload = json.dumps({"argv": args, "env": env, "cwd": cwd}).encode()
        try:
            with self._lock:
                socket.send_fds(self._control, [payload], [remote.fileno(), write_end])
        except OSError as exc:
            _log.warning("fork server %s unreachable (%r): starting a fresh process", self.proc.pid, exc)
            self.close()
            answers.close()
            os.close(read_end)
            return None
        finally:
            remote.close()
            os.close(write_end)
        line = _read_line(answers, timeout=START_TIMEOUT_S)
        if line is None or not line.startswith("pid "):
            _log.warning("fork server %s did not start a job (%s): starting a fresh process", self.proc.pid, line)
            answers.close()
            os.close(read_end)
            return None
        return ForkedProcess(args, int(line.split()[1]), answers, os.fdopen(read_end, "rb"))

    def close(self) -> None:
        """Let the server go: it takes no more jobs and exits once its running ones have ended."""
        self.dead.set()
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it, as close alone does not
        self._control.close()

    def stop(self, timeout: float) -> None:
        """Close, wait for the server to exit (SIGKILL, and its jobs with it, after `timeout`), and reap it."""
        self.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ForkServers:
    """An agent's fork servers, one per job environment, started on first need by one long-lived thread."""

    def __init__(self, python: str, preload: list[str], homes: Path) -> None:
        self._python = python
        self._preload = preload
        self._homes = homes
        self._interpreters = {"python", "python3", python}
        self._servers: OrderedDict[EnvKey, ForkServer | None] = OrderedDict()  # None: starting
        # Environments whose server could not preload: they would fail the same way again.
        self.failed: set[EnvKey] = set()
        self.started = 0
        self._evicted: list[ForkServer] = []  # let go, exiting once their jobs end; reaped at close
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a server was placed, got ready, failed or was closed
        self._wanted: queue.Queue[tuple[EnvKey, dict[str, str], str] | None] = queue.Queue()
        self._keeper = threading.Thread(target=self._keep, name="fork-servers", daemon=True)
        self._keeper.start()

    def start(
        self, argv: list[str], env: dict[str, str], cwd: str, *, wait_s: float = READY_WAIT_S
    ) -> ForkedProcess | None:
        """The job forked from the server for its environment; None to start it as a fresh process.

        A server that is still preloading is waited for, up to `wait_s`: a fresh process would spend that time
        importing the same libraries beside it, on the same cores.
        """
        args = python_args(argv, self._interpreters)
        key = env_key(env, cwd) if args is not None else None
        if args is None or key is None:
            return None
        for _ in range(2):  # a server found dead on the way (killed) is replaced once
            with self._changed:
                server = self._servers.get(key)
                if key not in self.failed and (key not in self._servers or (server and server.dead.is_set())):
                    self._servers.pop(key, None)
                    self._servers[key] = None
                    self._wanted.put((key, env, cwd))
                self._changed.wait_for(lambda: self._settled(key), timeout=wait_s)
                server = self._servers.get(key)
                if server is None or not server.ready.is_set() or server.dead.is_set():
                    return None
                self._servers.move_to_end(key)
            forked = server.start(args, env, cwd)
            if forked is not None or not server.dead.is_set():
                return forked
        return None

    def _settled(self, key: EnvKey) -> bool:
        """Whether the server for `key` is ready, failed or gone (a job need not wait for it any longer)."""
        if key in self.failed or key not in self._servers:
            return True
        server = self._servers[key]
        return server is not None and (server.ready.is_set() or server.dead.is_set())

    def warm(self, env: dict[str, str], cwd: str) -> None:
        """Start the server for jobs with this environment now, so that the first of them is forked too."""
        key = env_key(env, cwd)
        with self._lock:
            if key is None or key in self._servers:
                return
            self._servers[key] = None
        self._wanted.put((key, env, cwd))

    def close(self, timeout: float = 10.0) -> None:
        """Stop every server and reap it (stop the jobs first: those still running after `timeout` are killed)."""
        self._wanted.put(None)
        with self._changed:
            servers = [server for server in self._servers.values() if server is not None] + self._evicted
            self._servers.clear()
            self._evicted = []
            self._changed.notify_all()
        for server in servers:
            server.close()  # wakes the keeper if it waits for this one to be ready
        self._keeper.join(timeout=timeout)
        for server in servers:
            server.stop(timeout)

    def _keep(self) -> None:
        while (wanted := self._wanted.get()) is not None:
            key, env, cwd = wanted
            home = self._homes / f"forkserver-{len(key[0])}-{abs(hash(key)) % 10**8}"
            home.mkdir(parents=True, exist_ok=True)
            server_env = {k: v for k, v in env.items() if k not in PER_RUN and not k.startswith("POLYAXON_")}
            server_env["HOME"] = str(home)
            try:
                server = ForkServer(self._python, self._preload, server_env, cwd)
            except OSError as exc:
                _log.warning("fork server not started (%r): jobs start as fresh processes", exc)
                server = None
            self.started += 1
            if server is None:
                with self._changed:
                    self._servers.pop(key, None)
                    self.failed.add(key)
                    self._changed.notify_all()
                continue
            with self._changed:
                if key not in self._servers or self._servers[key] is not None:  # closed meanwhile
                    server.stop(timeout=0)
                    continue
                self._servers[key] = server
                while len(self._servers) > MAX_SERVERS:
                    _, old = self._servers.popitem(last=False)
                    if old is not None:
                        old.close()
                        self._evicted.append(old)
                self._evicted = [gone for gone in self._evicted if gone.proc.poll() is None]
            ready = server.await_ready(READY_TIMEOUT_S)
            with self._changed:
                if not ready:
                    self.failed.add(key)
                self._changed.notify_all()


def _read_line(sock: socket.socket, timeout: float | None) -> str | None:
    """One line from a stream socket; None at its end or after `timeout`."""
    sock.settimeout(timeout)
    data = b""
    try:
        while not data.endswith(b"\n"):
            chunk = sock.recv(1)
            if not chunk:
                return None
            data += chunk
    except OSError:
        return None
    return data.decode(errors="replace").strip()
