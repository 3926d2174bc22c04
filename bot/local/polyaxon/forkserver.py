"""A preloaded interpreter that forks jobs: what a warm node's image cache is to a pod's start, on this host.

Run by path (`python .../forkserver.py CONTROL_FD MODULE...`), not as part of the `bot` package: it imports
nothing of the project, only the standard library and the third-party MODULEs it preloads (torch, transformers,
trl, ...), so a job forked from it runs the project's code as it is on disk when the job starts. A job's
interpreter would spend most of its first seconds importing those libraries; forked from here it starts with them
imported and runs `python -m MODULE ARGS` or `python -c CODE ARGS` as a fresh interpreter would: its own session
(process group), its environment and working folder, stdin from /dev/null, stdout and stderr into the pipe it was
given, normal interpreter exit (atexit handlers, exit code, an uncaught exception's traceback and exit code 1).

The agent (`steps/forked.py`) decides which jobs may be forked: only those whose environment matches the one this
interpreter imported its libraries under (libraries read variables such as `HF_HOME` at import).

Protocol, on the AF_UNIX SOCK_SEQPACKET socket inherited as CONTROL_FD:
- this process sends `ready` once its modules are imported (or `failed: ...` and exits);
- the agent sends one JSON request `{"argv", "env", "cwd"}` with two file descriptors attached: a stream socket
  for the answers and the write end of the job's output pipe;
- on the answer socket the forked job writes `pid N` once it leads its own process group (or this process
  writes `error: ...`), then this process writes `exit CODE` when the job has ended (CODE as
  `subprocess.Popen.returncode`: negative for a signal);
- when the control socket closes this process exits once its running jobs have ended; when the agent dies this
  process is killed (it asked the kernel for SIGKILL when the agent's thread that started it ends), and its jobs
  with it (each asked the same of this process).
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import importlib
import json
import os
import random
import runpy
import selectors
import signal
import socket
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
MAX_REQUEST_BYTES = 1 << 20


@dataclass(frozen=True)
class Request:
    """One job to start: `python` argv (after the interpreter), environment, working folder."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


def preload(names: list[str]) -> None:
    """Import each `module` or `module:attr,attr` (an attribute makes a lazy package import its submodule)."""
    for name in names:
        module_name, _, attrs = name.partition(":")
        module = importlib.import_module(module_name)
        for attr in filter(None, attrs.split(",")):
            getattr(module, attr)


def serve(control: socket.socket) -> Request | None:
    """Fork a job for each request until the control socket closes; in a forked job, return its request."""
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, None)
    live: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, answer socket)
    closing = False
    while not closing or live:
        for key, _ in selector.select():
            if key.data is None:
                received = receive(control)
                if received is None:
                    # The agent let this server go: its running jobs finish first (an agent that died took
                    # this process, and through it its jobs, with it).
                    selector.unregister(control)
                    closing = True
                    continue
                request, answer, output = received
                pid = fork_job(request, answer, output, control, selector, live)
                if pid == 0:
                    return request  # this is the job now
            else:
                pidfd = key.fd
                pid, answer = live.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                send_line(answer, f"exit {os.waitstatus_to_exitcode(status)}")
                answer.close()
    return None


def receive(control: socket.socket) -> tuple[Request, socket.socket, int] | None:
    """The next request and its two descriptors; None when the agent closed the socket."""
    data, fds, _, _ = socket.recv_fds(control, MAX_REQUEST_BYTES, 2)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    answer_fd, output = fds
    payload: dict[str, Any] = json.loads(data)
    request = Request(argv=list(payload["argv"]), env=dict(payload["env"]), cwd=str(payload["cwd"]))
    return request, socket.socket(fileno=answer_fd), output


def fork_job(
    request: Request,
    answer: socket.socket,
    output: int,
    control: socket.socket,
    selector: selectors.BaseSelector,
    live: dict[int, tuple[int, socket.socket]],
) -> int:
    """Fork the job; 0 in the job (set up to run), its pid here (or -1 when the fork failed, told to the agent)."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        send_line(answer, f"error: fork failed: {exc}")
        answer.close()
        os.close(output)
        return -1
    if pid == 0:
        become_job(request, output, parent, answer, [control, *(sock for _, sock in live.values())], selector, live)
        return 0
    os.close(output)
    pidfd = os.pidfd_open(pid)
    live[pidfd] = (pid, answer)
    selector.register(pidfd, selectors.EVENT_READ, pid)
    return pid


def become_job(
    request: Request,
    output: int,
    parent: int,
    answer: socket.socket,
    sockets: list[socket.socket],
    selector: selectors.BaseSelector,
    live: dict[int, tuple[int, socket.socket]],
) -> None:
    """In the forked child: leave everything of the server behind and take the job's session, streams and env."""
    os.setsid()  # its own process group: stopping the job kills the whole tree
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the server died between the fork and the prctl: no signal would come
        os.kill(os.getpid(), signal.SIGKILL)
    # The pid is told from here, once the process group exists: a stop the agent sends right away reaches it.
    send_line(answer, f"pid {os.getpid()}")
    answer.close()
    selector.close()
    for pidfd in live:
        os.close(pidfd)
    for sock in sockets:
        sock.close()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    # A fresh interpreter seeds these from the OS; forked ones would all share the server's state.
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def run_job(request: Request) -> None:
    """Run the job as `python ARGV` would (`-m MODULE ...` or `-c CODE ...`, `-u` accepted)."""
    # `-u` only before the mode (the job's stdio is unbuffered already: PYTHONUNBUFFERED=1 is in every job's env).
    argv = request.argv[1:] if request.argv[:1] == ["-u"] else list(request.argv)
    mode, target, *args = argv
    sys.path[0] = request.cwd  # what `python -m`/`-c` put first: the working folder
    if mode == "-m":
        sys.argv = [target, *args]  # runpy sets argv[0] to the module's file
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif mode == "-c":
        sys.argv = ["-c", *args]
        sys.path[0] = ""
        # A `__main__` of the job's own: the server's globals are not the job's.
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), vars(main))
    else:
        raise SystemExit(f"forkserver: cannot run {request.argv!r}")


def send_line(sock: socket.socket, line: str) -> None:
    """One answer line; an agent that stopped listening is not this process's failure."""
    with contextlib.suppress(OSError):
        sock.sendall(line.encode() + b"\n")


def main(argv: list[str]) -> None:
    """Preload, tell the agent, serve; in a forked job, run it."""
    # Run by path, Python put this file's folder first on sys.path: it must not shadow anything.
    del sys.path[0]
    control = socket.socket(fileno=int(argv[0]))
    try:
        preload(argv[1:])
        if threading.active_count() != 1:
            raise RuntimeError(f"{threading.active_count()} threads after preloading; forking them is unsafe")
    except Exception as exc:  # told to the agent, which then starts every job as a fresh process
        control.send(f"failed: {exc!r}".encode())
        raise SystemExit(1) from exc
    sys.path.insert(0, "")  # replaced by the job's working folder in run_job
    # The preloaded libraries' ~465,000 objects leave the collector's view: otherwise every full collection in a
    # job (the trainer's own at its end, and the automatic ones) walks them all, 0.3 s each here, ~0.5 s of a 4 s
    # tiny run. It also keeps a collection from copying the pages a job shares with this process (the standard
    # library's advice for servers that fork).
    gc.freeze()
    control.send(b"ready")
    request = serve(control)
    if request is not None:
        run_job(request)


if __name__ == "__main__":
    main(sys.argv[1:])
