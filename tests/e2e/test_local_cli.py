"""`finetune-bot local`, the README's main job, driven by a script on stdin as a person would type it."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.local.polyaxon.procs import start_ticks
from tests.e2e.conftest import REPO

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

SCRIPT = """\
/finetune help run
/finetune run recipe=sft-tiny
/finetune logs $RUN follow
/finetune run recipe=sft-tny
wait 300
/finetune status
+eyes last
/finetune register $RUN model=tiny-chat
wait 60
as bob
+white_check_mark last
wait 60
as alice
/finetune promote tiny-chat:v1 stage=staging
wait 120
as bob
+white_check_mark last
wait 60
/finetune trace tiny-chat:v1
/finetune status $RUN
form run
recipe=quickstart
lr=7
submit
lr=0.1
epochs=2
preview
submit
home
wait 120
/finetune usage
/finetune budget
preview
+
hlep
finetune status
wait abc
sleep soon
/finetune sweep recipe=quickstart epochs=uniform(1,5)
as dave
/finetune run
"""
# No `quit`: the script ends at EOF, and the last command's answer must still be printed.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING) ", re.MULTILINE)
# What may follow a one-line edit: another message, a thread post, a private reply, a note of the shell's.
NEXT_ITEM = re.compile(r"^(    │ )?\[\d+\.\d+\] |^\(only |^» ")


def run_local(tmp_path: Path, script: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """`finetune-bot local` on a fresh database and store under `tmp_path`, driven by `script` on stdin."""
    exe = Path(sys.executable).with_name("finetune-bot")
    env = {
        **os.environ,
        "FINETUNE_DATABASE_URL": f"sqlite:///{tmp_path / 'local.db'}",
        "FINETUNE_WATCH_INTERVAL_S": "1",
        "POLYAXON_NO_CONFIG": "true",
    }
    subprocess.run([str(exe), "db", "upgrade"], cwd=REPO, env=env, check=True, timeout=120)
    return subprocess.run(
        [str(exe), "local", "--store", str(tmp_path / "store"), "--script", "-"],
        cwd=REPO,
        env=env,
        input=script,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_local_runs_sft_tiny_to_succeeded_from_a_script(tmp_path: Path, tiny_model: Path) -> None:
    done = run_local(tmp_path, SCRIPT, timeout=420)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "» ready" in out
    # The terminal is the channel: the bot's logs are in the file it names, not on stdout or stderr.
    log = tmp_path / "store" / "local.log"
    assert f"» the bot's logs go to {log}" in out
    assert LOG_LINE.search(out) is None and LOG_LINE.search(done.stderr) is None, done.stderr[-3000:]
    assert " INFO finetune_bot.commands: command " in log.read_text()
    # Models are built on first use of a recipe that needs one (sft-tiny's is there): nothing at start.
    before_form = out.split("» the run form is open", 1)[0]  # the form lists every recipe by name
    assert "building it now" not in out and "smollm2" not in before_form.lower()
    assert "no recipe 'sft-tny'; did you mean sft-tiny" in out  # a typo is answered, nothing starts
    # Each card edit is one line of what changed, not the card again.
    lines = out.splitlines()
    edits = [i for i, line in enumerate(lines) if "] (edited) " in line]
    assert edits, out[-3000:]
    assert all(i + 1 == len(lines) or NEXT_ITEM.match(lines[i + 1]) for i in edits), out[-3000:]
    told = "\n".join(lines[i] for i in edits)  # how far the card got by each edit depends on the watcher's ticks
    assert told.count("→ succeeded") >= 1 and "step 40/40" in told and "eval_loss" in told, told
    assert "active run(s) after" not in out  # `wait` saw every run finish
    # Registration works on the embedded defaults: bob is a local approver.
    assert "Approval request: register tiny-chat" in out
    assert "Registered *tiny-chat:v1*" in out, out[-3000:]
    assert "(reaction) +:floppy_disk: finetune-bot" in out
    # The release path: the serving check runs on the tiny model, bob approves, Polyaxon holds it in staging.
    assert "Serving check #1 of tiny-chat:v1: passed" in out, out[-4000:]
    assert "Approval request: promote tiny-chat:v1 to staging" in out, out[-4000:]
    assert "is now in *staging*" in out, out[-4000:]
    trace = out.split("Trace of tiny-chat:v1")[-1]
    assert "(stage staging)" in trace and "testing → staging" in trace, trace[:3000]
    # The status answer comes before the form's lines.
    assert "(only you) sft-tiny · sft-tiny-" in trace, out[-3000:]
    # The run form, driven from the shell: fields, a per-field error, the preview, a run with its card, App Home.
    form = out.split("» the run form is open", 1)[-1]
    assert "recipe = (empty)" in form and "lr = 0.05" in form, form[:3000]
    assert "✗ lr: 7 is out of bounds: float in (0, 1]" in form, form[:3000]
    assert "Plan: quickstart" in form and "lr = 0.1 ←" in form, form[:3000]
    assert "submitted: the form closed" in form and "(new) quickstart · quickstart-" in form, form[-3000:]
    assert "Your active runs (1)" in form, form[-3000:]
    # The form's run trains on the same local stack, with the bot's own interpreter (the TensorFlow quick start's
    # run through the same agent is tests/e2e/test_quickstart_tf.py's).
    ran = form.split("(new) quickstart · quickstart-", 1)[-1]
    assert "→ succeeded" in ran and "accuracy" in ran, form[-3000:]
    assert "stopped waiting" not in out
    # Everything it started is gone: no server, agent or job left behind.
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "store")], capture_output=True, text=True).stdout
    assert leftovers.strip() == "", leftovers
    shows_what_slack_shows(out)


def shows_what_slack_shows(out: str) -> None:
    """The same session read as a person in Slack would read it, and the shell's answers to lines it cannot run."""
    # `logs RUN follow`: the streamed message is printed as what it grew by, never as an empty line.
    streamed = [line for line in out.splitlines() if "] (streamed)" in line]
    assert streamed and all(line.split("] (streamed)", 1)[1].strip() for line in streamed), len(streamed)
    assert "The run ended with status" in out, out[-3000:]
    # Slack's entities read as Slack shows them: channels by name, links by label and address.
    assert "<#" not in out and "<http" not in out and "|open in Polyaxon>" not in out
    assert "the card is in #ml-training." in out and "in #C0TRAIN01" not in out
    assert "#ml-training · from " in out  # `/finetune usage`, a context block of a private reply
    assert "#ml-training has no accelerator-hour budget" in out  # `/finetune budget`
    assert re.search(r"log in its thread \[\d+\.\d{6}\]", out), out[-3000:]  # a link to a message: its ts
    assert re.search(r"open in Polyaxon \(http://127\.0\.0\.1:\d+/ui/", out), out[-3000:]
    # Lines the shell cannot carry out are answered with what would work.
    end = out.split("has no accelerator-hour budget", 1)[-1]
    assert "» no form is open: `form run` opens the run form" in end, end
    assert "» a reaction needs an emoji name: `+white_check_mark [TS|last]`" in end, end
    assert "» unknown input 'hlep'; the closest line this shell understands: `help`" in end, end
    assert "the closest line this shell understands: `/finetune status`" in end, end
    assert "wait takes a number of seconds, e.g. `wait 120`" in end and "could not convert" not in end, end
    assert "sleep takes a number of seconds, e.g. `sleep 5`" in end, end
    # A random sweep of an int key over a range, without trials=N: the key's type is the problem told, with the
    # values to list instead (a grid needs no trials=N).
    assert "epochs=uniform(1,5): epochs is int 1..50, and uniform samples real numbers" in end, end
    assert "epochs=1,2,3,4,5 (a grid: every value, no trials=N needed)" in end, end
    assert "a random sweep needs trials=N" not in end, end
    # `as` someone the workspace does not have is refused there, with who it has.
    assert "there is no 'dave' in this workspace; the shell acts as " in end and "(dave)" not in end, end
    assert "not a Slack user id" not in out
    # `/finetune run` alone opens the run form, a modal: told in one line (and only then, not for `form run`).
    assert out.count("» the run form opened (a modal in Slack); fill it here with `form run`") == 1, end
    assert "» the run form opened" in end.split("there is no 'dave'", 1)[-1], end


SWEEP_SCRIPT = """\
/finetune sweep recipe=quickstart lr=0.01,0.05,0.1 concurrency=2
/finetune run recipe=quickstart epochs=2
wait 180
/finetune outputs $RUN
sleep 2
/finetune sweep recipe=quickstart lr=0.01,0.05,0.1 concurrency=2
wait 300
/finetune status $RUN
"""


@pytest.mark.slow  # the same sweep runs through the real Bolt app in tests/e2e/test_sweeps.py by default
def test_local_sweeps_quickstart_to_one_card_and_a_leaderboard_of_three(tmp_path: Path) -> None:
    done = run_local(tmp_path, SWEEP_SCRIPT, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    refusal, rest = out.split("Planned quickstart as", 1)
    assert "waits for one confirmed run" in refusal and "/finetune outputs RUN" in refusal
    assert "read back: confirmed :white_check_mark:" in rest
    assert rest.count("(new) sweep · quickstart · quickstart-sweep-") == 1  # one card
    assert rest.count("(new) Leaderboard · quickstart-sweep-") == 1  # one leaderboard, then edits
    final = rest.split("(only you) sweep · quickstart ·")[-1]
    assert "*succeeded* · 3/3 done" in final
    # The leaderboard is a table block: the shell prints its header, then a line per trial, the best with a trophy.
    assert "# · trial · lr · status · accuracy" in final, final
    ranks = [line for line in final.splitlines() if line.startswith(("#1 · ", "#2 · ", "#3 · "))]
    assert len(ranks) == 3 and ":trophy:" in ranks[0] and all(" · succeeded · 0." in line for line in ranks), final


# ---- the session as a newcomer meets it: its store, its processes, its way out ---------------------------


def local_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a newcomer's `local`: no FINETUNE_DATABASE_URL, the repository's catalog."""
    env = {k: v for k, v in os.environ.items() if k != "FINETUNE_DATABASE_URL"}
    env.update({"FINETUNE_CATALOG_DIR": str(REPO / "manifests"), "POLYAXON_NO_CONFIG": "true"})
    return env


def children(pid: int) -> set[int]:
    """Every live descendant of `pid` (read from /proc; zombies count as gone)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (not gone, not zombies)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `predicate` until it holds or `timeout_s` passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


# What a terminal gives the program it runs in the foreground: SIGINT at its default. A suite started as a background
# job (`pytest ... &` in a script) runs with SIGINT ignored, which every child inherits through exec, and Python
# then installs no KeyboardInterrupt: Ctrl-C would reach nothing. The child execs `local` itself, keeping its pid.
AS_FOREGROUND = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


def start_interactive(tmp_path: Path, store: Path) -> tuple[subprocess.Popen[str], list[str]]:
    """`finetune-bot local` with its stdin held open (a person not typing yet), once it says it is ready."""
    exe = Path(sys.executable).with_name("finetune-bot")
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_FOREGROUND, str(exe), "local", "--store", str(store)],
        cwd=tmp_path,
        env=local_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("» ready"):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(120):
        proc.kill()
        raise AssertionError("".join(seen)[-3000:])
    return proc, seen


def test_local_keeps_its_database_in_the_store_and_stops_what_a_dead_session_left(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # A server an earlier session left running when it was killed (an orphan, its session gone).
    orphan = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True)
    assert orphan.stdout is not None
    stale = int(orphan.stdout.readline())
    orphan.wait()
    pid_files = store / "polyaxon" / ".local"
    pid_files.mkdir(parents=True)
    (pid_files / "server.pid").write_text(
        json.dumps({"role": "server", "pid": stale, "start_ticks": start_ticks(stale), "session": orphan.pid,
                    "session_ticks": 1, "port": 8123})
    )  # fmt: skip
    exe = Path(sys.executable).with_name("finetune-bot")
    done = subprocess.run(
        [str(exe), "local", "--store", str(store), "--script", "-"],
        cwd=tmp_path,  # a working folder of the newcomer's own: nothing of the session may land there
        env=local_env(tmp_path),
        input="/finetune status\nhelp\n",
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    database = store.resolve() / "finetune-bot.db"
    assert f"» created the bot's database {database}" in out, out[:2000]
    assert f"the bot's database is {database}" in out
    assert database.is_file() and not list(tmp_path.glob("*.db"))
    with sqlite3.connect(database) as db:
        assert db.execute("select count(*) from deliveries").fetchone()[0] >= 1  # `/finetune status` was recorded
    assert f"» stopped a Polyaxon server (pid {stale}, port 8123) that an earlier session left running" in out, out
    assert wait_until(lambda: not alive({stale}), 15)
    assert "form run" in out.split("» Lines this shell understands", 1)[-1]


def test_local_refuses_a_store_another_live_session_uses(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with subprocess.Popen(["sleep", "300"]) as theirs:
        pid_files = store / "polyaxon" / ".local"
        pid_files.mkdir(parents=True)
        me = os.getpid()
        (pid_files / "server.pid").write_text(
            json.dumps({"role": "server", "pid": theirs.pid, "start_ticks": start_ticks(theirs.pid), "session": me,
                        "session_ticks": start_ticks(me), "port": None})
        )  # fmt: skip
        exe = Path(sys.executable).with_name("finetune-bot")
        done = subprocess.run(
            [str(exe), "local", "--store", str(store), "--script", "-"],
            cwd=tmp_path,
            env=local_env(tmp_path),
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"the store {store.resolve() / 'polyaxon'} is in use: another session (pid {me}" in done.stderr
        assert "stop that session first, or pass another --store" in done.stderr
        assert "Traceback" not in done.stderr and theirs.poll() is None  # theirs is left alone
        theirs.kill()


def test_ctrl_c_ends_local_with_one_line_and_stops_everything(tmp_path: Path) -> None:
    proc, seen = start_interactive(tmp_path, tmp_path / "store")
    started = children(proc.pid)
    assert len(started) >= 2, started  # the Polyaxon server and its agent

    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=90)

    out = "".join(seen)
    assert code == 130, out[-3000:]
    assert out.count("» interrupted (Ctrl-C): stopping the bot and the local Polyaxon stack") == 1, out[-3000:]
    assert "Aborted!" not in out and "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert wait_until(lambda: not alive(started), 15), alive(started)


def test_sigkill_of_local_takes_the_polyaxon_server_and_agent_with_it(tmp_path: Path) -> None:
    proc, _ = start_interactive(tmp_path, tmp_path / "store")
    started = children(proc.pid)
    assert len(started) >= 2, started

    proc.kill()
    proc.wait(timeout=10)

    # Nobody is left to stop them in order: the kernel's parent-death signal must.
    assert wait_until(lambda: not alive(started), 15), [
        Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ") for pid in alive(started)
    ]
