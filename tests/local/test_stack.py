"""The stack as `finetune-bot local-polyaxon` runs it: a foreground process that prints its host,
restarts what dies, and leaves no process behind on SIGTERM."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.local.polyaxon.stack import api_is_up
from bot.polyaxon import PolyaxonGateway
from tests.fixtures import polyaxon as plx

pytestmark = pytest.mark.polyaxon

REPO = Path(__file__).resolve().parents[2]

# A job with a grandchild process, both of which must die with the stack.
FAMILY = """
import subprocess, time
child = subprocess.Popen(["sleep", "600"])
print(f"grandchild {child.pid}", flush=True)
time.sleep(600)
"""


@dataclass
class Foreground:
    proc: subprocess.Popen[str]
    host: str
    store: Path
    gateway: PolyaxonGateway


def _children() -> dict[int, int]:
    """pid -> ppid of every process on the host."""
    table: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Field 4 is the ppid; the command name (field 2) may contain spaces, so split after ')'.
        table[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return table


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`."""
    table = _children()
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in table.items():
            if ppid == parent and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find_child(root: int, needle: str) -> int:
    matches = [pid for pid in descendants(root) if needle in cmdline(pid)]
    assert len(matches) == 1, (needle, [(p, cmdline(p)) for p in descendants(root)])
    return matches[0]


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def foreground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Foreground]:
    """`python -m bot.local.polyaxon --port P --store DIR` in its own process."""
    store = tmp_path_factory.mktemp("foreground-store")
    port = plx.free_closed_port_host().rsplit(":", 1)[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYAXON_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.local.polyaxon", "--port", port, "--store", str(store)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the stack printed no host within 120 s"
        host = proc.stdout.readline().strip()
        gw = PolyaxonGateway(host=host, token=None, project=plx.PROJECT)
        gw.ensure_project()
        yield Foreground(proc=proc, host=host, store=store, gateway=gw)
        gw.close()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def _quick_run_succeeds(fg: Foreground, prefix: str) -> None:
    run = fg.gateway.submit(plx.python_operation("print('alive')", name="quick"), name=plx.unique_name(prefix))
    done = plx.wait_for_status(fg.gateway, run.uuid, {"succeeded", "failed"}, timeout_s=60)
    assert done.status == "succeeded"


def test_prints_its_host_and_serves_the_api(foreground: Foreground) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", foreground.host)
    assert api_is_up(foreground.host)
    _quick_run_succeeds(foreground, "hello")


def test_a_killed_agent_is_restarted_and_its_lost_run_marked_failed(foreground: Foreground) -> None:
    gw = foreground.gateway
    run = gw.submit(plx.python_operation(plx_sleep(), name="victim"), name=plx.unique_name("victim"))
    plx.wait_for_status(gw, run.uuid, {"running"}, timeout_s=60)
    agent = find_child(foreground.proc.pid, "bot.local.polyaxon.agent")
    os.kill(agent, signal.SIGKILL)
    wait_until(
        lambda: any("bot.local.polyaxon.agent" in cmdline(p) for p in descendants(foreground.proc.pid) - {agent}),
        timeout_s=30,
        what="a new agent process",
    )
    lost = plx.wait_for_status(gw, run.uuid, {"failed"}, timeout_s=60)
    # As a cluster says a pod whose node went away: the container kubelet could not find, relayed by the operator.
    failed = [c for c in gw.get_run(lost.uuid).conditions if c.type == "failed"][-1]
    assert failed.reason == "BackoffLimitExceeded", failed
    assert "ContainerStatusUnknownExitCode 137" in (failed.message or ""), failed
    _quick_run_succeeds(foreground, "after-agent-restart")


def test_the_stack_survives_the_server_going_away(foreground: Foreground) -> None:
    """The agent loop raises TypeError when the server goes away; the supervisor brings both back."""
    server = find_child(foreground.proc.pid, "haupt sandbox")
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: not api_is_up(foreground.host, timeout_s=0.5), timeout_s=10, what="the API to go down")
    wait_until(lambda: api_is_up(foreground.host), timeout_s=90, what="the restarted API")
    _quick_run_succeeds(foreground, "after-server-restart")


def test_sigterm_stops_server_agent_and_every_run_leaving_no_process(foreground: Foreground) -> None:
    gw = foreground.gateway
    run = gw.submit(plx.python_operation(FAMILY, name="family"), name=plx.unique_name("family"))
    plx.wait_for_status(gw, run.uuid, {"running"}, timeout_s=60)
    wait_until(
        lambda: any(line.value.startswith("grandchild ") for line in gw.tail_logs(run.uuid, lines=20).lines),
        timeout_s=20,
        what="the grandchild's pid in the logs",
    )
    grandchild = int(
        next(
            line.value for line in gw.tail_logs(run.uuid, lines=20).lines if line.value.startswith("grandchild ")
        ).split()[1]
    )
    family = descendants(foreground.proc.pid)
    assert grandchild in family
    assert any("haupt sandbox" in cmdline(p) for p in family)
    foreground.proc.send_signal(signal.SIGTERM)
    assert foreground.proc.wait(timeout=60) == 0
    survivors = [(pid, cmdline(pid)) for pid in family if alive(pid)]
    assert survivors == []


def plx_sleep() -> str:
    return "import time; print('sleeping', flush=True); time.sleep(600)"
