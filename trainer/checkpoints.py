"""Finding the newest complete checkpoint and checking that it may resume the current run.

A Trainer checkpoint folder `checkpoint-<step>` is complete when its weights, optimizer, scheduler,
RNG state (one `rng_state*.pth` per process) and `trainer_state.json` are all there, and when the
`finetune_checkpoint.json` marker is there: `CheckpointMetaCallback` writes it atomically in
`on_save`, after the Trainer has written everything else, with what compatibility is checked on
(model, tokenizer fingerprint, recipe hash, world size). A folder a kill interrupted misses the marker
(or a file) and is skipped.
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
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
# Where a run's checkpoints may sit below the path the bot passes: the outputs folder itself, or a
# Polyaxon run's artifacts folder (checkpoints under `outputs/`).
_SEARCH_DEPTH = 3


class CheckpointError(ValueError):
    """No usable checkpoint, or a checkpoint that does not belong to this run's model, tokenizer or recipe."""


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
    match = _CHECKPOINT_RE.match(path.name)
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
    """Return every `checkpoint-<step>` folder under `root` (up to a few levels down), newest step first."""
    if not root.is_dir():
        return []
    if checkpoint_step(root) is not None:
        return [root]
    found: list[Path] = []
    frontier = [root]
    for _ in range(_SEARCH_DEPTH):
        next_frontier = []
        for folder in frontier:
            for child in sorted(folder.iterdir()):
                if not child.is_dir():
                    continue
                if checkpoint_step(child) is not None:
                    found.append(child)
                else:
                    next_frontier.append(child)
        frontier = next_frontier
    return sorted(found, key=lambda p: (checkpoint_step(p) or 0, str(p)), reverse=True)


def newest_complete_checkpoint(root: Path) -> Path | None:
    """Return the highest-step complete checkpoint under `root`, skipping incomplete ones, or None."""
    for checkpoint in list_checkpoints(root):
        if not missing_parts(checkpoint):
            return checkpoint
    return None


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
    """Turn `--resume_from` (empty, `latest`, a run's artifacts/outputs path or a checkpoint) into a checkpoint.

    `latest` looks under this run's output folder and starts fresh when it holds no checkpoint yet; a
    bare `checkpoint-N` names a folder there (a copied run holds its parent's checkpoints in its own
    outputs); any other path must hold a complete checkpoint.
    """
    if not resume_from:
        return None
    if resume_from == "latest":
        return newest_complete_checkpoint(output_dir)
    root = Path(resume_from)
    if not root.is_absolute() and re.fullmatch(r"checkpoint-\d+", resume_from):
        root = output_dir / resume_from
    if not root.exists():
        raise CheckpointError(f"resume path {root} does not exist")
    checkpoint = newest_complete_checkpoint(root)
    if checkpoint is None:
        incomplete = [f"{p.name}: missing {', '.join(missing_parts(p))}" for p in list_checkpoints(root)]
        detail = f" ({'; '.join(incomplete)})" if incomplete else ""
        raise CheckpointError(f"no complete checkpoint under {root}{detail}")
    return checkpoint


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
