"""Checkpoint retention, what the trainer reports about checkpoints, and resume that never starts fresh.

One real tiny run (12 steps, a checkpoint every 2, keep 2 plus the best by the eval contract's first
metric) serves the retention tests; a second one, in the same process, resumes from a copy of its last
checkpoint with a longer schedule, as `/finetune resume RUN max_steps=N` does through Polyaxon's copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.runs import TINY_CHAT, read_jsonl, tiny_args, train_in_process, train_losses
from trainer.checkpoints import missing_parts
from trainer.run import EXIT_BAD_RESUME, EXIT_NO_CHECKPOINT

pytestmark = pytest.mark.trainer

STEPS, SAVE, KEEP = 12, 2, 2
RUN: dict[str, Any] = {
    "max_steps": STEPS,
    "save_steps": SAVE,
    "save_total_limit": KEEP,
    "eval_steps": 5,  # not a divisor of save_steps: the trainer evaluates at every save instead
    "eval_dataset_name": str(TINY_CHAT),
    "eval_split": "eval",
    "eval_max_samples": 16,
    # Accuracy ranks (higher is better); on this seed it stops improving at step 6, so the best is old.
    "eval_metrics": "eval_mean_token_accuracy,eval_loss",
    "per_device_train_batch_size": 4,
}


@pytest.fixture(scope="module")
def kept_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 12-step run with retention on."""
    out = tmp_path_factory.mktemp("kept-run")
    assert train_in_process(tiny_args(tiny_model, out, **RUN)) == 0
    return out


def outputs(out: Path) -> list[dict[str, Any]]:
    """The `outputs` records of a run's tracking file, in order."""
    return [r["outputs"] for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "outputs"]


def on_disk(out: Path) -> list[str]:
    """Checkpoint folders in `out`, oldest first."""
    return sorted((p.name for p in out.glob("checkpoint-*")), key=lambda name: int(name.split("-")[1]))


def best_step(out: Path) -> int:
    """The best step the Trainer recorded by the eval metric."""
    return int(json.loads((out / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())["best_global_step"])


def test_keeps_the_newest_complete_checkpoints_plus_the_best(kept_run: Path) -> None:
    best = best_step(kept_run)
    newest = [f"checkpoint-{step}" for step in range(STEPS - SAVE * (KEEP - 1), STEPS + 1, SAVE)]
    assert f"checkpoint-{best}" not in newest, "the run must make an older checkpoint the best"
    assert on_disk(kept_run) == [f"checkpoint-{best}", *newest]
    assert len(on_disk(kept_run)) <= KEEP + 1
    for name in on_disk(kept_run):
        assert missing_parts(kept_run / name) == []


def test_evaluation_runs_at_every_save_so_the_best_is_known(kept_run: Path) -> None:
    evals = [r["step"] for r in read_jsonl(kept_run / "metrics.jsonl") if "eval_loss" in r.get("metrics", {})]
    assert evals[:-1] == list(range(SAVE, STEPS + 1, SAVE))  # then the final contract evaluation


def test_every_save_reports_the_checkpoints_kept(kept_run: Path) -> None:
    saves = [o for o in outputs(kept_run) if "checkpoint_latest" in o]
    assert [o["checkpoint_latest_step"] for o in saves] == [*range(SAVE, STEPS + 1, SAVE), STEPS]  # + the end
    for record in saves:
        assert record["checkpoint_latest"] == f"checkpoint-{record['checkpoint_latest_step']}"
        assert record["checkpoints"][-1] == record["checkpoint_latest"]
        assert len(record["checkpoints"]) <= KEEP + 1
    final = saves[-1]
    assert final["checkpoints"] == on_disk(kept_run)
    assert final["checkpoint_best"] == f"checkpoint-{best_step(kept_run)}"
    assert final["checkpoint_best_step"] == best_step(kept_run)
    assert outputs(kept_run)[0] == {"max_steps": STEPS}


def test_resume_with_a_longer_schedule_continues_from_the_checkpoint(
    kept_run: Path, tiny_model: Path, tmp_path: Path
) -> None:
    # Polyaxon's copy gives the child only the checkpoint it resumes from, in its own outputs.
    shutil.copytree(kept_run / f"checkpoint-{STEPS}", tmp_path / f"checkpoint-{STEPS}")
    longer = STEPS + 2
    argv = tiny_args(tiny_model, tmp_path, **{**RUN, "max_steps": longer}, resume_from=f"checkpoint-{STEPS}")
    assert train_in_process(argv) == 0

    records = read_jsonl(tmp_path / "metrics.jsonl")
    resumed_at = next(i for i, r in enumerate(records) if "resumed_from_step" in r.get("outputs", {}))
    assert records[resumed_at]["outputs"] == {
        "max_steps": longer,
        "resumed_from_checkpoint": f"checkpoint-{STEPS}",
        "resumed_from_step": STEPS,
    }
    first_step = next(i for i, r in enumerate(records) if r["kind"] == "metrics")
    assert resumed_at < first_step, "reported before training went on"
    assert list(train_losses(tmp_path / "metrics.jsonl")) == [STEPS + 1, longer]
    final = [o for o in outputs(tmp_path) if "checkpoint_latest" in o][-1]  # the model digests come after
    assert final["checkpoint_latest"] == f"checkpoint-{longer}" and final["checkpoint_latest_step"] == longer
    assert final["checkpoints"] == on_disk(tmp_path)
    assert f"checkpoint-{longer}" in on_disk(tmp_path) and len(on_disk(tmp_path)) <= KEEP + 1


@pytest.mark.parametrize("resume_from", ["latest", "checkpoint-4"], ids=["latest", "named"])
def test_resume_without_a_checkpoint_fails_instead_of_training_from_scratch(
    tiny_model: Path, tmp_path: Path, resume_from: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "checkpoint-4").mkdir()  # a save a kill interrupted: not complete
    assert train_in_process(tiny_args(tiny_model, tmp_path, resume_from=resume_from)) == EXIT_NO_CHECKPOINT
    assert "refusing to train from scratch" in caplog.text
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "model").exists()


@pytest.mark.parametrize(
    "resume_from",
    ["../../etc/passwd", "/etc/passwd", "kept-run-checkpoint"],
    ids=["dotdot", "absolute", "another-runs-checkpoint"],
)
def test_resume_from_a_path_is_refused(
    kept_run: Path, tiny_model: Path, tmp_path: Path, resume_from: str, caplog: pytest.LogCaptureFixture
) -> None:
    value = str(kept_run / f"checkpoint-{STEPS}") if resume_from == "kept-run-checkpoint" else resume_from
    assert train_in_process(tiny_args(tiny_model, tmp_path / "out", resume_from=value)) == EXIT_BAD_RESUME
    assert "is not accepted: give `latest` or `checkpoint-<step>`" in caplog.text
    assert not (tmp_path / "out").exists()
