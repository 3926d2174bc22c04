"""One run as the local executor holds it, and where its files live."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from polyaxon._local_process import process_types

from bot.local.polyaxon.config import StackLayout
from bot.local.polyaxon.steps.termination import MAX_LOG_LINES, PodSpec


class JobProcess(Protocol):
    """What the executor uses of a job's process: a `subprocess.Popen`, or a job forked by a fork server."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdout(self) -> IO[bytes] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class Job:
    """A run's containers (init steps, then the main one) and the live state of its processes."""

    owner: str
    project: str
    uuid: str
    containers: list[process_types.V1Container]
    thread: threading.Thread | None = None
    proc: JobProcess | None = None
    stop_requested: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    pod: PodSpec = field(default_factory=PodSpec)
    # Set when the Job's deadline ended it (the executor terminated it as the Job controller would).
    deadline_exceeded: threading.Event = field(default_factory=threading.Event)
    # The last log lines: what kubelet reads for a termination message with FallbackToLogsOnError.
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOG_LINES))
    log_lock: threading.Lock = field(default_factory=threading.Lock)
    readers: list[threading.Thread] = field(default_factory=list)


@dataclass(frozen=True)
class JobPaths:
    """The folders and files of one run."""

    store_run: Path  # the run's folder in the artifacts store
    context_run: Path  # where the job writes its artifacts, mirrored into store_run
    home: Path  # a clean HOME, removed when the run ends
    log: Path  # JSON-lines logs, in the store only
    record: Path  # the live process group, so nothing outlives the stack
    termination: Path  # the main container's termination message (kubelet's /dev/termination-log)

    @classmethod
    def of(cls, layout: StackLayout, uuid: str) -> JobPaths:
        """The paths of run `uuid` in a stack's layout."""
        store_run = layout.store / uuid
        return cls(
            store_run=store_run,
            context_run=layout.context_root / "artifacts" / uuid,
            home=layout.homes / uuid,
            log=store_run / "plxlogs" / "logs.jsonl",
            record=layout.jobs / f"{uuid}.json",
            termination=layout.homes / uuid / "termination-log",
        )

    def make(self) -> None:
        """Create the folders the run writes into."""
        for folder in (self.log.parent, self.context_run / "outputs", self.home):
            folder.mkdir(parents=True, exist_ok=True)
