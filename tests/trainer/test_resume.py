"""Kill a run mid-training, resume it in a new process (as a new operation would): steps and losses join up.

Also: SIGTERM is an orderly stop (checkpoint at the stopped step, metrics flushed, exit 143).
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.runs import read_jsonl, start_trainer, tiny_args, train_in_process, train_losses, wait_for
from trainer.checkpoints import META_FILE, missing_parts, newest_complete_checkpoint
from trainer.run import EXIT_STOPPED

pytestmark = pytest.mark.trainer

STEPS = 24
SAVE = 8
FAST: dict[str, Any] = {"per_device_train_batch_size": 4}


def last_logged_step(out: Path) -> int:
    """Highest global step with a train loss in the tracking file."""
    return max(train_losses(out / "metrics.jsonl"), default=0)


# Slow (~35 s); kept out of the default run: kill, resume and identical losses stay covered by the
# preflight's checkpoint-recovery line (tests/e2e/test_preflight.py).
@pytest.mark.slow
def test_killed_run_resumes_with_identical_losses(tiny_model: Path, tmp_path: Path) -> None:
    first, second, reference = tmp_path / "op1", tmp_path / "op2", tmp_path / "reference"
    log = tmp_path / "op1.log"
    proc = start_trainer(tiny_args(tiny_model, first, max_steps=STEPS, save_steps=SAVE, **FAST), log)
    try:
        wait_for(
            lambda: (first / f"checkpoint-{SAVE}" / META_FILE).exists() and last_logged_step(first) >= SAVE + 2,
            timeout=240,
            proc=proc,
            log=log,
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (first / "model").exists(), "the run finished before it was killed"

    complete = newest_complete_checkpoint(first)
    assert complete is not None
    resumed_from = int(complete.name.split("-")[1])
    # A new operation whose own outputs start with a copy of the first one's (what Polyaxon's copy does).
    shutil.copytree(first, second, ignore=shutil.ignore_patterns("metrics.jsonl"))
    # A checkpoint torn by a kill at a later step must be skipped.
    torn = second / f"checkpoint-{resumed_from + 5}"
    torn.mkdir()
    shutil.copy(complete / "model.safetensors", torn / "model.safetensors")
    (torn / "trainer_state.json").write_text(json.dumps({"global_step": resumed_from + 5}))
    assert missing_parts(torn)

    log2 = tmp_path / "op2.log"
    argv2 = tiny_args(tiny_model, second, max_steps=STEPS, save_steps=SAVE, resume_from="latest", **FAST)
    proc2 = start_trainer(argv2, log2)
    assert proc2.wait(timeout=240) == 0, log2.read_text()[-3000:]

    assert train_in_process(tiny_args(tiny_model, reference, max_steps=STEPS, save_steps=SAVE, **FAST)) == 0
    expected = train_losses(reference / "metrics.jsonl")
    before, after = train_losses(first / "metrics.jsonl"), train_losses(second / "metrics.jsonl")
    assert min(after) == resumed_from + 1
    assert max(after) == STEPS
    assert after == {step: expected[step] for step in range(resumed_from + 1, STEPS + 1)}
    assert before == {step: expected[step] for step in before}
    final = json.loads((second / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    assert final["global_step"] == STEPS


def test_sigterm_stops_in_order(tiny_model: Path, tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_trainer(tiny_args(tiny_model, out, max_steps=200, save_steps=1000, **FAST), log)
    try:
        wait_for(lambda: last_logged_step(out) >= 3, timeout=240, proc=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == EXIT_STOPPED, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    stopped = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "results"][-1]["results"]
    step = stopped["stopped_at_step"]
    assert 3 <= step < 200
    checkpoint = out / f"checkpoint-{step}"
    assert missing_parts(checkpoint) == []
    assert last_logged_step(out) == step
