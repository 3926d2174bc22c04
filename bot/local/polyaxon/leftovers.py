"""What an earlier session left running on a store: the stack's pid files, and what is done about them at start.

Server and agent die with the session that started them (`procs.die_with_parent`), but a session from before
that, or a kernel that lost the signal, can leave a server holding the store's SQLite database and an agent
running its jobs. Each start therefore reads the pid files the last one wrote: a process still alive whose
session is gone is stopped (and said); one whose session is alive belongs to another session on the same
store, and the start is refused with a way forward (two servers on one database would corrupt each other).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bot.local.polyaxon.config import StackLayout
from bot.local.polyaxon.procs import (
    command_line,
    group_running,
    kill_group,
    kill_recorded_group,
    parent_pid,
    start_ticks,
)

_log = logging.getLogger(__name__)

ROLES = ("agent", "server")  # the agent first: it stops its jobs before the server they report to goes
STOP_GRACE_S = 10.0
SESSION_CHARS = 100


class StoreInUseError(RuntimeError):
    """Another live session runs a server or agent on this store."""


@dataclass(frozen=True)
class PidRecord:
    """One process the stack started: enough to recognise it again (pid reuse) and its session."""

    role: str
    pid: int
    start_ticks: int | None
    session: int  # the process that started it
    session_ticks: int | None
    port: int | None = None


def pid_file(folder: Path, role: str) -> Path:
    """Where the stack records its `role` process ("server" or "agent")."""
    return folder / f"{role}.pid"


def record(folder: Path, role: str, pid: int, *, port: int | None = None) -> None:
    """Write the pid file of a process this session just started."""
    me = os.getpid()
    entry = PidRecord(role, pid, start_ticks(pid), me, start_ticks(me), port)
    pid_file(folder, role).write_text(json.dumps(asdict(entry)))


def forget(folder: Path, role: str) -> None:
    """Drop the pid file of a process stopped in order."""
    pid_file(folder, role).unlink(missing_ok=True)


def read(folder: Path, role: str) -> PidRecord | None:
    """The recorded process of `role`, if a readable pid file is there."""
    try:
        return PidRecord(**json.loads(pid_file(folder, role).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int, ticks: int | None) -> bool:
    """Whether `pid` is still the process recorded (not gone, not reused by another)."""
    return ticks is not None and start_ticks(pid) == ticks


def clear(layout: StackLayout, store: Path) -> list[str]:
    """Stop what a dead session left running on `store` (server, agent, their jobs); one note per process stopped.

    Raises StoreInUseError when a live session (not this one) runs a process there.
    """
    folder = layout.local
    notes: list[str] = []
    for role in ROLES:
        entry = read(folder, role)
        if entry is None:
            continue
        if not _alive(entry.pid, entry.start_ticks):
            forget(folder, role)
            continue
        owned = parent_pid(entry.pid) == entry.session and _alive(entry.session, entry.session_ticks)
        if owned and entry.session != os.getpid():
            session = command_line(entry.session)[:SESSION_CHARS] or "?"
            raise StoreInUseError(
                f"the store {store} is in use: another session (pid {entry.session}: {session}) runs its Polyaxon "
                f"{role} (pid {entry.pid}); stop that session first, or pass another --store"
            )
        _stop(entry.pid)
        forget(folder, role)
        port = f", port {entry.port}" if entry.port else ""
        notes.append(
            f"stopped a Polyaxon {role} (pid {entry.pid}{port}) that an earlier session left running on {store}"
        )
    for line in notes:
        _log.warning("%s", line)
    # Jobs of a session that died: killed now, their records kept for the new agent to report their runs failed.
    kill_jobs(layout.jobs, drop_records=False)
    return notes


def kill_jobs(jobs: Path, *, drop_records: bool) -> None:
    """SIGKILL the job process groups recorded in `jobs` (no agent owns them any more).

    `drop_records` when the stack is going away and nobody will report their runs; otherwise the next agent
    reads the records and reports those runs failed.
    """
    if not jobs.is_dir():
        return
    killed: list[int] = []
    for record_path in jobs.glob("*.json"):
        try:
            entry = json.loads(record_path.read_text())
            pgid = int(entry["pgid"])
        except (OSError, ValueError, KeyError):
            continue
        if kill_recorded_group(pgid, entry.get("start_ticks"), signal.SIGKILL):
            killed.append(pgid)
        if drop_records:
            record_path.unlink(missing_ok=True)
    # SIGKILL is asynchronous: a killed process may still be tearing down when killpg returns. Whoever stops the
    # stack is told it has stopped only when no member of those groups runs any more.
    deadline = time.monotonic() + STOP_GRACE_S
    while any(group_running(pgid) for pgid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)


def _stop(pid: int) -> None:
    """SIGTERM the process and its group (the stack starts each as a group leader), SIGKILL what is left after a
    grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        kill_group(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + STOP_GRACE_S
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _running(pid):
            break
    kill_group(pid, signal.SIGKILL)  # what of its group outlived it


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie has stopped: only its parent's wait is missing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
