"""What the sidecar does while a run lives: mirror its context folder into the store, sync events summaries."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from bot.local.polyaxon.steps.job import Job, JobPaths, JobProcess
from bot.local.polyaxon.steps.process import terminate

# The executor's logger: these lines keep the name they had in the agent's log.
_log = logging.getLogger("bot.local.polyaxon.executor")

SummarySyncer = Callable[[str, str, str, Path, datetime | None], None]
"""sync(owner, project, run_uuid, run_path, last_check): summaries of run_path/events and /resources."""

# Logs live in the store only; an auto-resume init step copies them into the context folder and
# they must not be mirrored back over the live file.
MIRROR_EXCLUDE = (".git", "plxlogs", ".tmpplxlogs")


def mirror_tree(src: Path, dst: Path, exclude: Iterable[str] = MIRROR_EXCLUDE) -> int:
    """Copy new or changed files from `src` into `dst` (what the sidecar's artifact sync does)."""
    if not src.is_dir():
        return 0
    excluded = set(exclude)
    copied = 0
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in excluded]
        target_root = dst / Path(root).relative_to(src)
        for name in files:
            source = Path(root) / name
            target = target_root / name
            try:
                st = source.stat()
                if target.exists():
                    tt = target.stat()
                    if tt.st_size == st.st_size and tt.st_mtime_ns == st.st_mtime_ns:
                        continue
                target_root.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                copied += 1
            except FileNotFoundError:
                # A file removed while we walk (a checkpoint rotated away) is not an error.
                continue
    return copied


def sync_run(job: Job, paths: JobPaths, sync_summaries: SummarySyncer, last_check: datetime | None) -> datetime:
    """Mirror the run's artifacts and sync summaries written since `last_check`; the next `last_check`."""
    started = datetime.now(UTC)
    mirror_tree(paths.context_run, paths.store_run)
    try:
        sync_summaries(job.owner, job.project, job.uuid, paths.store_run, last_check)
    except Exception as exc:
        _log.info("events summaries of run %s not synced yet: %r", job.uuid, exc)
        return last_check or started
    return started


def wait_syncing(
    job: Job,
    proc: JobProcess,
    paths: JobPaths,
    sync_summaries: SummarySyncer,
    interval_s: float,
    *,
    deadline: float | None = None,
    grace_s: float = 10.0,
) -> int:
    """Wait for the main process, syncing every `interval_s` while it runs; its exit code. Past `deadline` (a
    monotonic time: the Job's activeDeadlineSeconds) the job is terminated as the Job controller deletes its pod."""
    last_check: datetime | None = None
    while True:
        try:
            proc.wait(timeout=interval_s)
            break
        except subprocess.TimeoutExpired:
            last_check = sync_run(job, paths, sync_summaries, last_check)
        if deadline is not None and time.monotonic() >= deadline and not job.deadline_exceeded.is_set():
            job.deadline_exceeded.set()
            _log.info("run %s is past its deadline: terminating it", job.uuid)
            threading.Thread(target=terminate, args=(job, grace_s), daemon=True).start()
    return proc.wait()


def final_sync(job: Job, paths: JobPaths, sync_summaries: SummarySyncer) -> None:
    """Sync everything once more after the run; a failure is logged, as the run is over either way."""
    # last_check=None: the backstop for tracking writes that did not land while the run was alive.
    try:
        sync_run(job, paths, sync_summaries, None)
    except Exception:
        _log.exception("final sync of run %s failed", job.uuid)
