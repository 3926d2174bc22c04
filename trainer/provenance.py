"""What a run records about itself: library versions, the code revision, the local recipe hash, the final model.

Cheap to import (the libraries are looked up by their installed metadata, the model folder by its manifest).
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

from trainer.evaluation import contract_hash
from trainer.trainers import COMMON_RECIPE_KEYS, DEFAULT_TRAINER, TrainerSpec

_VERSIONED = ("torch", "transformers", "trl", "peft", "datasets", "accelerate", "tokenizers")


def library_versions() -> dict[str, str]:
    """Return the versions of Python and the training libraries."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "absent"
    return versions


def git_revision() -> str:
    """Return `git rev-parse HEAD` of the working directory, or an empty string outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def local_recipe_hash(spec: TrainerSpec, script_args: Any, training_args: Any, model_args: Any) -> str:
    """Hash the training-relevant choices when the bot passed no `--recipe_hash` (so resume still checks).

    The fields: the config values of `COMMON_RECIPE_KEYS` and the trainer's own `recipe_keys`, the pinned model,
    the LoRA settings, the pinned data, and for a trainer other than SFT its name (and reward functions). SFT's
    fields are what they were before the other trainers came, so its checkpoints keep resuming. The schedule's
    length (`max_steps`, `num_train_epochs`) is left out: resuming with a longer one is allowed.
    """
    # A key the config lacks hashes as "None" (transformers 5 dropped `warmup_ratio`; SFT's hash keeps the key).
    keys = (*COMMON_RECIPE_KEYS, *spec.recipe_keys)
    fields: dict[str, Any] = {key: str(getattr(training_args, key, None)) for key in keys}
    fields.update(
        model=f"{model_args.model_name_or_path}@{model_args.model_revision}",
        peft=str((model_args.use_peft, model_args.lora_r, model_args.lora_alpha, model_args.lora_target_modules)),
        dataset=f"{script_args.dataset_name}@{script_args.dataset_revision}:{script_args.dataset_split}",
        metrics=[],
    )
    if spec.name != DEFAULT_TRAINER:
        fields["trainer"] = spec.name
    if spec.takes_reward_funcs:
        fields["reward_funcs"] = script_args.reward_funcs
    return "local-" + contract_hash(fields).removeprefix("sha256:")[:16]


def model_outputs(model_dir: Path) -> dict[str, Any]:
    """Write the final model folder's manifest; return its outputs `model_digest`, `model_size_bytes`, `model_files`."""
    from trainer.digests import read_manifest, write_manifest

    digest = write_manifest(model_dir)
    files = (read_manifest(model_dir) or {}).get("files", [])
    return {"model_digest": digest, "model_size_bytes": sum(f["size"] for f in files), "model_files": len(files)}
