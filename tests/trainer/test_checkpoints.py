"""Newest complete checkpoint (half-written ones skipped), resume resolution, compatibility checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.checkpoints import (
    META_FILE,
    CheckpointError,
    CheckpointMeta,
    check_compatible,
    list_checkpoints,
    missing_parts,
    newest_complete_checkpoint,
    resolve_resume,
    write_meta,
)

META = CheckpointMeta(
    global_step=0,
    model_name_or_path="tiny",
    model_revision="main",
    tokenizer_fingerprint="sha256:tok",
    recipe_hash="r1",
    world_size=1,
)


def make_checkpoint(root: Path, step: int, skip: tuple[str, ...] = (), world_size: int = 1) -> Path:
    """Write a fake Trainer checkpoint folder, leaving out the named parts."""
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    files = ["model.safetensors", "optimizer.pt", "scheduler.pt"]
    files += ["rng_state.pth"] if world_size == 1 else [f"rng_state_{i}.pth" for i in range(world_size)]
    for name in files:
        if name not in skip:
            (folder / name).write_bytes(b"x")
    if "trainer_state.json" not in skip:
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if META_FILE not in skip:
        write_meta(folder, CheckpointMeta(**{**META.to_json(), "global_step": step, "world_size": world_size}))
    return folder


def test_complete_checkpoint_has_nothing_missing(tmp_path: Path) -> None:
    assert missing_parts(make_checkpoint(tmp_path, 10)) == []


@pytest.mark.parametrize(
    ("skip", "missing"),
    [
        (("model.safetensors",), "weights"),
        (("optimizer.pt",), "optimizer.pt"),
        (("scheduler.pt",), "scheduler.pt"),
        (("rng_state.pth",), "rng_state (0 of 1)"),
        (("trainer_state.json",), "trainer_state.json"),
        ((META_FILE,), META_FILE),
    ],
    ids=["weights", "optimizer", "scheduler", "rng", "trainer-state", "marker"],
)
def test_each_missing_part_makes_a_checkpoint_incomplete(tmp_path: Path, skip: tuple[str, ...], missing: str) -> None:
    assert missing in missing_parts(make_checkpoint(tmp_path, 10, skip=skip))


def test_distributed_checkpoint_needs_every_rank_rng_state(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path, 4, world_size=2)
    assert missing_parts(folder) == []
    (folder / "rng_state_1.pth").unlink()
    assert "rng_state (1 of 2)" in missing_parts(folder)


def test_newest_complete_skips_half_written(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 5)
    make_checkpoint(tmp_path, 10)
    make_checkpoint(tmp_path, 15, skip=(META_FILE, "optimizer.pt"))  # killed while saving
    empty_state = make_checkpoint(tmp_path, 20, skip=("trainer_state.json",))
    (empty_state / "trainer_state.json").write_text("{")  # torn write
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-20",
        "checkpoint-15",
        "checkpoint-10",
        "checkpoint-5",
    ]
    assert newest_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-10"


def test_numeric_not_lexical_order(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 9)
    make_checkpoint(tmp_path, 10)
    assert newest_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-10"


def test_resume_from_a_run_artifacts_path_finds_outputs(tmp_path: Path) -> None:
    make_checkpoint(tmp_path / "run-uuid" / "outputs", 30)
    assert resolve_resume(str(tmp_path / "run-uuid"), tmp_path / "new") == tmp_path / "run-uuid/outputs/checkpoint-30"


def test_a_bare_checkpoint_name_is_looked_up_in_this_runs_outputs(tmp_path: Path) -> None:
    # What the bot's `resume RUN checkpoint=step-10` passes: the copied run holds its parent's checkpoints.
    make_checkpoint(tmp_path / "outputs", 10)
    make_checkpoint(tmp_path / "outputs", 20)
    assert resolve_resume("checkpoint-10", tmp_path / "outputs") == tmp_path / "outputs" / "checkpoint-10"
    with pytest.raises(CheckpointError, match="does not exist"):
        resolve_resume("checkpoint-99", tmp_path / "outputs")


def test_resume_from_a_checkpoint_folder(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path, 7)
    assert resolve_resume(str(folder), tmp_path / "new") == folder


def test_latest_without_checkpoints_starts_fresh(tmp_path: Path) -> None:
    assert resolve_resume("latest", tmp_path) is None
    assert resolve_resume("", tmp_path) is None


def test_explicit_path_without_complete_checkpoint_is_refused(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 3, skip=("optimizer.pt",))
    with pytest.raises(CheckpointError, match=r"no complete checkpoint .*checkpoint-3: missing optimizer.pt"):
        resolve_resume(str(tmp_path), tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        resolve_resume(str(tmp_path / "nope"), tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_name_or_path": "other"}, "this run other@main"),
        ({"model_revision": "abc"}, "this run tiny@abc"),
        ({"tokenizer_fingerprint": "sha256:other"}, "tokenizer differs"),
        ({"recipe_hash": "r2"}, "recipe hash r1, this run r2"),
        ({"world_size": 2}, "world size 1, this run 2"),
    ],
    ids=["model", "revision", "tokenizer", "recipe", "world-size"],
)
def test_incompatible_checkpoints_are_refused(tmp_path: Path, change: dict[str, object], message: str) -> None:
    folder = make_checkpoint(tmp_path, 10)
    expected = CheckpointMeta(**{**META.to_json(), **change})
    with pytest.raises(CheckpointError, match=message):
        check_compatible(folder, expected)
    assert check_compatible(folder, META).global_step == 10
