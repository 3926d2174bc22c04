"""Process-group helpers shared by the supervisor and the agent (no Polyaxon imports)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path


def kill_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it is already gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None when it does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name (which may contain spaces); starttime is field 22.
    return int(stat.rsplit(")", 1)[1].split()[19])


def kill_recorded_group(pgid: int, ticks: int | None, sig: int) -> bool:
    """Signal a recorded job group unless its pid now belongs to another process (pid reuse)."""
    leader_ticks = start_ticks(pgid)
    if leader_ticks is not None and ticks is not None and leader_ticks != ticks:
        return False
    # Leader gone: only surviving members of that group can still carry its id.
    return kill_group(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still exists."""
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_running(pgid: int) -> bool:
    """Whether a member of the group still runs; unlike `group_alive`, zombies do not count (in a container
    whose pid 1 reaps nothing they stay in the table for good)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state, fields[2] the process group.
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` that makes the child die (SIGKILL) when the thread that spawned it ends.

    A process group goes down together only when someone signals it; after a SIGKILL of the supervisor nobody
    does, so the kernel must: PR_SET_PDEATHSIG. It fires when the spawning *thread* exits, so spawn from a
    thread that lives as long as the child (the main thread, or the thread that waits on it).
    """
    import ctypes

    # Looked up before the fork: the child only makes the call.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between the fork and the prctl: then no signal would ever come.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def parent_pid(pid: int) -> int | None:
    """The process's parent pid (None when it does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def command_line(pid: int) -> str:
    """The process's command line, arguments joined by spaces ("" when it does not exist)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
