"""Newest complete checkpoint (half-written ones skipped), resume resolution, retention, compatibility checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.checkpoints import (
    META_FILE,
    CheckpointError,
    CheckpointMeta,
    ResumeValueError,
    abandon_newer,
    check_compatible,
    complete_checkpoints,
    list_checkpoints,
    missing_parts,
    newest_complete_checkpoint,
    resolve_resume,
    retention_plan,
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


def test_a_checkpoint_name_is_looked_up_in_this_runs_outputs(tmp_path: Path) -> None:
    # What the bot's `resume RUN checkpoint=step-10` passes: Polyaxon's copy put that checkpoint in the outputs.
    make_checkpoint(tmp_path / "outputs", 10)
    make_checkpoint(tmp_path / "outputs", 20)
    assert resolve_resume("checkpoint-10", tmp_path / "outputs") == tmp_path / "outputs" / "checkpoint-10"
    assert resolve_resume("latest", tmp_path / "outputs") == tmp_path / "outputs" / "checkpoint-20"
    with pytest.raises(CheckpointError, match=r"no such checkpoint .*complete ones: checkpoint-20, checkpoint-10"):
        resolve_resume("checkpoint-99", tmp_path / "outputs")


def test_empty_starts_fresh(tmp_path: Path) -> None:
    assert resolve_resume("", tmp_path) is None


@pytest.mark.parametrize(
    "value",
    [
        "../../../etc/passwd",
        "/etc/passwd",
        "checkpoint-10/../../other-run/outputs/checkpoint-10",
        "../other-run/outputs",
        "outputs/checkpoint-10",
        "checkpoint-",
        "checkpoint-1x",
        "checkpoint-\u0661",
        "Latest",
        " latest",
        "step-10",
    ],
    ids=[
        "dotdot",
        "absolute",
        "escape",
        "other-run",
        "subfolder",
        "no-step",
        "bad-step",
        "unicode-digit",
        "case",
        "space",
        "bot-syntax",
    ],
)
def test_anything_but_latest_or_a_checkpoint_name_is_refused(tmp_path: Path, value: str) -> None:
    make_checkpoint(tmp_path / "outputs", 10)
    with pytest.raises(ResumeValueError, match="is not accepted: give `latest` or `checkpoint-<step>`"):
        resolve_resume(value, tmp_path / "outputs")


def test_an_absolute_path_to_a_real_checkpoint_is_refused(tmp_path: Path) -> None:
    other = make_checkpoint(tmp_path / "other-run" / "outputs", 10)
    with pytest.raises(ResumeValueError):
        resolve_resume(str(other), tmp_path / "outputs")


def test_a_checkpoint_link_out_of_the_outputs_is_refused(tmp_path: Path) -> None:
    other = make_checkpoint(tmp_path / "other-run" / "outputs", 10)
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "checkpoint-10").symlink_to(other)
    with pytest.raises(ResumeValueError, match="leads outside"):
        resolve_resume("checkpoint-10", tmp_path / "outputs")


def test_latest_without_a_complete_checkpoint_is_refused_not_fresh(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"no complete checkpoint in .*refusing to train from scratch"):
        resolve_resume("latest", tmp_path / "never-created")
    make_checkpoint(tmp_path, 3, skip=("optimizer.pt",))
    with pytest.raises(CheckpointError, match=r"no complete checkpoint .*checkpoint-3: missing optimizer.pt"):
        resolve_resume("latest", tmp_path)


def test_a_named_incomplete_checkpoint_is_refused(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 3, skip=(META_FILE,))
    with pytest.raises(CheckpointError, match=f"is incomplete \\(missing {META_FILE}\\)"):
        resolve_resume("checkpoint-3", tmp_path)


def test_checkpoints_are_only_looked_for_directly_in_the_outputs(tmp_path: Path) -> None:
    make_checkpoint(tmp_path / "run-uuid" / "outputs", 30)
    assert list_checkpoints(tmp_path) == []
    with pytest.raises(CheckpointError):
        resolve_resume("latest", tmp_path)


def steps(paths: list[Path]) -> list[int]:
    """Steps of `checkpoint-<step>` folders."""
    return sorted(int(p.name.split("-")[1]) for p in paths)


@pytest.mark.parametrize(
    ("keep", "best", "kept"),
    [
        (2, None, [40, 50]),
        (2, 10, [10, 40, 50]),
        (2, 50, [40, 50]),
        (1, 20, [20, 50]),
        (0, None, [10, 20, 30, 40, 50]),
    ],
    ids=["newest", "plus-best", "best-is-newest", "one-plus-best", "keep-all"],
)
def test_retention_keeps_the_newest_complete_and_the_best(
    tmp_path: Path, keep: int, best: int | None, kept: list[int]
) -> None:
    for step in (10, 20, 30, 40, 50):
        make_checkpoint(tmp_path, step)
    doomed = retention_plan(tmp_path, keep, best, current_step=50)
    assert steps(doomed) == sorted({10, 20, 30, 40, 50} - set(kept))


def test_retention_counts_only_complete_checkpoints(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 10)
    make_checkpoint(tmp_path, 20)
    make_checkpoint(tmp_path, 25, skip=("optimizer.pt", META_FILE))  # a save a kill interrupted
    make_checkpoint(tmp_path, 30)
    make_checkpoint(tmp_path, 40, skip=(META_FILE,))  # newer than anything complete: left alone
    assert steps(retention_plan(tmp_path, 2, None, current_step=30)) == [10, 25]
    # The folder being marked now is never deleted, complete or not.
    assert 40 not in steps(retention_plan(tmp_path, 1, None, current_step=40))
    assert steps(complete_checkpoints(tmp_path)) == [10, 20, 30]


def test_resuming_unmarks_newer_checkpoints(tmp_path: Path) -> None:
    for step in (10, 20, 30):
        make_checkpoint(tmp_path, step)
    assert steps(abandon_newer(tmp_path, 10)) == [20, 30]
    assert newest_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-10"


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
