"""Finding the newest complete checkpoint and checking that it may resume the current run.

A Trainer checkpoint folder `checkpoint-<step>` is complete when its weights, optimizer, scheduler,
RNG state (one `rng_state*.pth` per process) and `trainer_state.json` are all there, and when the
`finetune_checkpoint.json` marker is there: `CheckpointMetaCallback` writes it atomically in
`on_save`, after the Trainer has written everything else, with what compatibility is checked on
(model, tokenizer fingerprint, recipe hash, world size). A folder a kill interrupted misses the marker
(or a file) and is skipped.

A run resumes only from a checkpoint in its own output folder (`--resume_from` is `latest` or
`checkpoint-<N>`, never a path): `/finetune resume` starts a Polyaxon copy of the parent whose outputs
hold the one checkpoint it loads. Retention (`retention_plan`) keeps the newest complete checkpoints and
the best one by the eval metric; it runs after each marker is written, so it never counts a torn folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

META_FILE = "finetune_checkpoint.json"
TRAINER_STATE = "trainer_state.json"
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.safetensors",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.bin",
)
_CHECKPOINT_RE = re.compile(r"checkpoint-([0-9]+)")
RESUME_LATEST = "latest"


class CheckpointError(ValueError):
    """No usable checkpoint, or a checkpoint that does not belong to this run's model, tokenizer or recipe."""


class ResumeValueError(CheckpointError):
    """`--resume_from` is not empty, `latest` or `checkpoint-<N>` (a path, `..`, another run's folder)."""


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint was trained with; written next to the Trainer's files."""

    global_step: int
    model_name_or_path: str
    model_revision: str
    tokenizer_fingerprint: str
    recipe_hash: str
    world_size: int

    def to_json(self) -> dict[str, Any]:
        """Return the marker file's JSON document."""
        return {
            "global_step": self.global_step,
            "model_name_or_path": self.model_name_or_path,
            "model_revision": self.model_revision,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "recipe_hash": self.recipe_hash,
            "world_size": self.world_size,
        }


def checkpoint_step(path: Path) -> int | None:
    """Return the step of a `checkpoint-<step>` folder, or None for any other name."""
    match = _CHECKPOINT_RE.fullmatch(path.name)
    return int(match.group(1)) if match else None


def read_meta(checkpoint: Path) -> CheckpointMeta | None:
    """Read a checkpoint's marker, or None when it is missing or unreadable."""
    try:
        data = json.loads((checkpoint / META_FILE).read_text())
        return CheckpointMeta(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_meta(checkpoint: Path, meta: CheckpointMeta) -> None:
    """Write the marker atomically (temporary file, fsync, rename), so it is either whole or absent."""
    tmp = checkpoint / f".{META_FILE}.tmp"
    with tmp.open("w") as handle:
        json.dump(meta.to_json(), handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, checkpoint / META_FILE)


def missing_parts(checkpoint: Path) -> list[str]:
    """List what a checkpoint folder lacks to be resumable (empty when complete)."""
    missing = []
    if not any((checkpoint / name).is_file() and (checkpoint / name).stat().st_size > 0 for name in WEIGHT_FILES):
        missing.append("weights")
    for name in ("optimizer.pt", "scheduler.pt"):
        if not (checkpoint / name).is_file() or (checkpoint / name).stat().st_size == 0:
            missing.append(name)
    meta = read_meta(checkpoint)
    if meta is None:
        missing.append(META_FILE)
    rng_files = sorted(checkpoint.glob("rng_state*.pth"))
    expected_rng = meta.world_size if meta else 1
    if len(rng_files) < expected_rng:
        missing.append(f"rng_state ({len(rng_files)} of {expected_rng})")
    try:
        state = json.loads((checkpoint / TRAINER_STATE).read_text())
        if state.get("global_step") != checkpoint_step(checkpoint):
            missing.append(f"{TRAINER_STATE} (step mismatch)")
    except (OSError, ValueError):
        missing.append(TRAINER_STATE)
    return missing


def list_checkpoints(root: Path) -> list[Path]:
    """Return the `checkpoint-<step>` folders directly in `root`, newest step first."""
    if not root.is_dir():
        return []
    found = [child for child in root.iterdir() if child.is_dir() and checkpoint_step(child) is not None]
    return sorted(found, key=lambda p: checkpoint_step(p) or 0, reverse=True)


def complete_checkpoints(root: Path) -> list[Path]:
    """Return the complete checkpoints directly in `root`, oldest step first."""
    return [checkpoint for checkpoint in reversed(list_checkpoints(root)) if not missing_parts(checkpoint)]


def newest_complete_checkpoint(root: Path) -> Path | None:
    """Return the highest-step complete checkpoint in `root`, skipping incomplete ones, or None."""
    for checkpoint in list_checkpoints(root):
        if not missing_parts(checkpoint):
            return checkpoint
    return None


def retention_plan(root: Path, keep: int, best_step: int | None, current_step: int) -> list[Path]:
    """Return the checkpoint folders to delete so that the newest `keep` complete ones and the best remain.

    `keep <= 0` keeps every complete checkpoint. Incomplete folders older than the newest complete one are
    leftovers of an interrupted save and go too; the folder of `current_step` (being marked now) stays.
    """
    complete = complete_checkpoints(root)
    keep_steps = {checkpoint_step(p) for p in (complete[-keep:] if keep > 0 else complete)}
    keep_steps |= {best_step, current_step}
    newest = checkpoint_step(complete[-1]) if complete else None
    doomed = []
    for checkpoint in list_checkpoints(root):
        step = checkpoint_step(checkpoint)
        if step in keep_steps:
            continue
        if checkpoint in complete or (newest is not None and step is not None and step < newest):
            doomed.append(checkpoint)
    return doomed


def check_compatible(checkpoint: Path, expected: CheckpointMeta) -> CheckpointMeta:
    """Refuse a checkpoint trained with another model, tokenizer, recipe or world size; return its marker."""
    meta = read_meta(checkpoint)
    if meta is None:
        raise CheckpointError(f"{checkpoint} has no {META_FILE}: not a complete finetune-bot checkpoint")
    problems = []
    if meta.model_name_or_path != expected.model_name_or_path or meta.model_revision != expected.model_revision:
        problems.append(
            f"checkpoint has model {meta.model_name_or_path}@{meta.model_revision}, "
            f"this run {expected.model_name_or_path}@{expected.model_revision}"
        )
    if meta.tokenizer_fingerprint != expected.tokenizer_fingerprint:
        problems.append("tokenizer differs")
    if meta.recipe_hash != expected.recipe_hash:
        problems.append(f"checkpoint has recipe hash {meta.recipe_hash}, this run {expected.recipe_hash}")
    if meta.world_size != expected.world_size:
        problems.append(f"checkpoint has world size {meta.world_size}, this run {expected.world_size}")
    if problems:
        raise CheckpointError(f"cannot resume from {checkpoint}: " + "; ".join(problems))
    return meta


def resolve_resume(resume_from: str, output_dir: Path) -> Path | None:
    """Turn `--resume_from` into a complete checkpoint in this run's own output folder (None: start fresh).

    Accepted: empty (fresh), `latest` (the newest complete checkpoint there) or `checkpoint-<N>` (that
    folder there). Anything else raises `ResumeValueError`; naming a checkpoint that is not there, not
    complete, or `latest` with none complete raises `CheckpointError`: a resume never trains from scratch.
    """
    if not resume_from:
        return None
    if resume_from != RESUME_LATEST and not _CHECKPOINT_RE.fullmatch(resume_from):
        raise ResumeValueError(
            f"--resume_from={resume_from!r} is not accepted: give `latest` or `checkpoint-<step>`, a checkpoint "
            f"in this run's own output folder {output_dir} (no paths, no `..`, no other run's folder), "
            "or nothing to start fresh"
        )
    if resume_from == RESUME_LATEST:
        checkpoint = newest_complete_checkpoint(output_dir)
        if checkpoint is None:
            raise CheckpointError(
                f"--resume_from=latest: no complete checkpoint in {output_dir}{_incomplete_detail(output_dir)}; "
                "refusing to train from scratch"
            )
        return checkpoint
    checkpoint = output_dir / resume_from
    if not checkpoint.is_dir():
        have = ", ".join(p.name for p in reversed(complete_checkpoints(output_dir))) or "none"
        raise CheckpointError(
            f"--resume_from={resume_from}: no such checkpoint in {output_dir} (complete ones: {have}); "
            "refusing to train from scratch"
        )
    if checkpoint.resolve().parent != output_dir.resolve():
        raise ResumeValueError(f"--resume_from={resume_from}: {checkpoint} leads outside {output_dir}")
    missing = missing_parts(checkpoint)
    if missing:
        raise CheckpointError(
            f"--resume_from={resume_from}: {checkpoint} is incomplete (missing {', '.join(missing)}); "
            "refusing to train from scratch"
        )
    return checkpoint


def _incomplete_detail(root: Path) -> str:
    incomplete = [f"{p.name}: missing {', '.join(missing_parts(p))}" for p in list_checkpoints(root)]
    return f" ({'; '.join(incomplete)})" if incomplete else ""


def abandon_newer(output_dir: Path, step: int) -> list[Path]:
    """Unmark the checkpoints newer than the one resumed from: a resumed run writes its own, and a folder it
    overwrites must not look complete while half of it is the abandoned run's. Returns the unmarked folders."""
    unmarked = []
    for checkpoint in list_checkpoints(output_dir):
        if (checkpoint_step(checkpoint) or 0) > step and (checkpoint / META_FILE).exists():
            (checkpoint / META_FILE).unlink()
            unmarked.append(checkpoint)
    return unmarked


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """Return `sha256:<hex>` over the tokenizer's vocabulary, special tokens and chat template."""
    vocab = tokenizer.get_vocab()
    payload = {
        "vocab": sorted(vocab.items()),
        "special": sorted(str(t) for t in tokenizer.all_special_tokens),
        "chat_template": tokenizer.chat_template or "",
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
