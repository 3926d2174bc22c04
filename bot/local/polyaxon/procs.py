"""Process-group helpers shared by the supervisor and the agent (no Polyaxon imports)."""

from __future__ import annotations

import os
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
