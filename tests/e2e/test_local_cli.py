"""`finetune-bot local`, the README's main job, driven by a script on stdin as a person would type it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

SCRIPT = """\
/finetune help run
/finetune run recipe=sft-tiny max_steps=10 save_steps=5
/finetune run recipe=sft-tny
wait 300
/finetune status
+eyes last
/finetune register $RUN model=local-demo
sleep 2
as bob
+white_check_mark last
sleep 6
/finetune trace local-demo
quit
"""


def test_local_runs_sft_tiny_to_succeeded_from_a_script(tmp_path: Path, tiny_model: Path) -> None:
    exe = Path(sys.executable).with_name("finetune-bot")
    env = {
        **os.environ,
        "FINETUNE_DATABASE_URL": f"sqlite:///{tmp_path / 'local.db'}",
        "FINETUNE_WATCH_INTERVAL_S": "1",
        "POLYAXON_NO_CONFIG": "true",
    }
    subprocess.run([str(exe), "db", "upgrade"], cwd=REPO, env=env, check=True, timeout=120)
    done = subprocess.run(
        [str(exe), "local", "--store", str(tmp_path / "store"), "--script", "-"],
        cwd=REPO,
        env=env,
        input=SCRIPT,
        capture_output=True,
        text=True,
        timeout=420,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "» ready" in out
    assert "no recipe 'sft-tny'; did you mean sft-tiny" in out  # a typo is answered, nothing starts
    assert "(edited)" in out and "succeeded" in out and "eval_loss" in out, out[-3000:]
    assert "active run(s) after" not in out  # `wait` saw every run finish
    # Registration works on the embedded defaults: bob is a local approver.
    assert "Approval request: register local-demo" in out
    assert "Registered *local-demo:v1*" in out and "Trace of local-demo:v1" in out, out[-3000:]
    # Everything it started is gone: no server, agent or job left behind.
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "store")], capture_output=True, text=True).stdout
    assert leftovers.strip() == "", leftovers
