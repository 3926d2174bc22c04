"""`finetune-bot local`, the README's main job, driven by a script on stdin as a person would type it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

SCRIPT = """\
/finetune help run
/finetune run recipe=sft-tiny
/finetune run recipe=sft-tny
wait 300
/finetune status
+eyes last
/finetune register $RUN model=tiny-chat
sleep 2
as bob
+white_check_mark last
sleep 6
as alice
/finetune promote tiny-chat:v1 stage=staging
wait 120
sleep 4
as bob
+white_check_mark last
sleep 4
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
/finetune run recipe=quickstart-tf epochs=2
wait 240
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
    # The TensorFlow quick start runs on the same local stack, with the bot's own interpreter.
    tf = form.split("(new) quickstart-tf · quickstart-tf-", 1)[-1]
    assert "→ succeeded" in tf and "accuracy" in tf, form[-3000:]
    assert "stopped waiting" not in out
    # Everything it started is gone: no server, agent or job left behind.
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "store")], capture_output=True, text=True).stdout
    assert leftovers.strip() == "", leftovers


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
    ranks = [line for line in final.splitlines() if line.startswith((":trophy: #1", "#2", "#3"))]
    assert len(ranks) == 3 and all("succeeded · accuracy" in line for line in ranks), final
