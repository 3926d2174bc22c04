"""torchrun launches the preflight can kill whole: each in its own session, each tagged in its environment.

torchrun starts its workers in sessions of their own, so killing the launcher's process group leaves them
running. Every launch therefore carries `FINETUNE_PREFLIGHT_LAUNCH=<token>` in its environment, which
torchrun, its workers and their data loader processes inherit; `kill_launch` kills the group, then every
process whose environment carries the token (read from /proc), until none is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

LAUNCH_ENV = "FINETUNE_PREFLIGHT_LAUNCH"
KILL_DEADLINE_S = 20.0


@dataclass(frozen=True)
class Rendezvous:
    """Where a node's torchrun meets the others: nodes, this node's rank, the master, processes per node."""

    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int | None  # None: a free local port per launch (one node only)
    nproc_per_node: int

    @property
    def world_size(self) -> int:
        """The number of ranks a launch starts across all nodes."""
        return self.nnodes * self.nproc_per_node

    @property
    def local_ranks(self) -> list[int]:
        """The global ranks torchrun's static rendezvous gives this node's processes."""
        first = self.node_rank * self.nproc_per_node
        return list(range(first, first + self.nproc_per_node))

    def torchrun(self) -> list[str]:
        """`python -m torch.distributed.run` with this rendezvous (the module or script goes after it)."""
        port = self.master_port if self.master_port is not None else free_port()
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nnodes={self.nnodes}",
            f"--node_rank={self.node_rank}",
            f"--master_addr={self.master_addr}",
            f"--master_port={port}",
            f"--nproc_per_node={self.nproc_per_node}",
        ]


@dataclass(frozen=True)
class LaunchResult:
    """How a launch ended: its exit code (None when it was killed), whether the wall timeout did it, and its log."""

    returncode: int | None
    timed_out: bool
    wall_s: float
    log: Path
    left_behind: list[int]

    @property
    def ok(self) -> bool:
        """Exited 0 on its own."""
        return self.returncode == 0 and not self.timed_out

    def log_text(self) -> str:
        """The launch's combined output."""
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.is_file() else ""


def free_port() -> int:
    """A TCP port free on this host right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def pids_with_env(key: str, value: str) -> list[int]:
    """Live (non-zombie) processes whose environment holds `key=value`, this one excluded (empty without /proc)."""
    needle = f"{key}={value}".encode()
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def tagged_pids(token: str) -> list[int]:
    """Live processes of the launch tagged with `token`."""
    return pids_with_env(LAUNCH_ENV, token)


class Launch:
    """One command started in its own session with a token in its environment; waited on, or killed whole."""

    def __init__(self, command: list[str], log: Path, env: Mapping[str, str], cwd: Path | None = None) -> None:
        self.token = uuid.uuid4().hex
        self.log = log
        self.started = time.monotonic()
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as handle:
            self.proc = subprocess.Popen(
                command,
                cwd=cwd,
                env={**env, LAUNCH_ENV: self.token},
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, timeout_s: float) -> LaunchResult:
        """Wait for the launch to exit; kill it whole at the timeout."""
        result = self.wait_until(timeout_s, lambda: False)
        assert result is not None
        return result

    def wait_until(self, timeout_s: float, until: Callable[[], bool]) -> LaunchResult | None:
        """Wait for the launch to exit (killed whole at the timeout); None, still running, once `until` holds."""
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self._result(self.proc.returncode, timed_out=False, left_behind=self._reap())
            if until():
                return None
            time.sleep(0.2)
        return self.kill(timed_out=True)

    def kill(self, *, timed_out: bool = False) -> LaunchResult:
        """SIGKILL the launch's process group and every process carrying its token; report any that survive."""
        left = kill_tagged(self.proc, self.token)
        return self._result(None, timed_out=timed_out, left_behind=left)

    def _reap(self) -> list[int]:
        # Workers of a launcher that exited (even with 0) must not outlive it.
        return kill_tagged(self.proc, self.token) if tagged_pids(self.token) else []

    def _result(self, returncode: int | None, *, timed_out: bool, left_behind: list[int]) -> LaunchResult:
        wall = time.monotonic() - self.started
        return LaunchResult(returncode, timed_out, wall, self.log, left_behind)


def kill_tagged(proc: subprocess.Popen[bytes], token: str, deadline_s: float = KILL_DEADLINE_S) -> list[int]:
    """SIGKILL `proc`'s process group and every process tagged with `token`, until none is left; return the
    pids still alive at the deadline (empty when all died)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + deadline_s
    left = tagged_pids(token)
    while left and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
        time.sleep(0.1)
        left = tagged_pids(token)
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        left = sorted({*left, proc.pid})
    return left
