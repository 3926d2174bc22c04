"""What a run wrote, as read back from its artifacts store, and whether it checks out (pure decisions).

The trainer records a content manifest in every checkpoint and in the final model folder
(`finetune_files.json`) and the digests as run outputs (`checkpoint_digests`, `model_digest`,
`eval_results_digest`). The digest of a folder is a contract shared with `trainer/digests.py` (the trainer
stands alone, so it is written twice; a test checks that both agree): `sha256:` + sha256 of one line
`path<TAB>size<TAB>sha256-hex<LF>` per file, in path order, paths relative to the folder, the manifest,
the checkpoint completion marker and hidden files left out (`listed`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MANIFEST = "finetune_files.json"
MARKER = "finetune_checkpoint.json"
_CHECKPOINT_RE = re.compile(r"^outputs/(checkpoint-([0-9]+))/")
WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.safetensors",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.bin",
)
TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
TORCH_STATE_DICT = "torch-state-dict"
TORCH_WEIGHTS = (".pt", ".pth")
# A Keras model saved whole (the TensorFlow quick start's): one `.keras` archive (config, weights, optimizer).
KERAS = "keras"
KERAS_FILES = (".keras",)


@dataclass(frozen=True)
class FileEntry:
    """One file of a folder: path relative to the folder, size and sha256 (hex) as found in the store."""

    path: str
    size: int
    sha256: str


def listed(path: str) -> bool:
    """Whether a file counts in its folder's digest: not the manifest, not the completion marker (written after
    it), not a hidden temporary file."""
    return path not in (MANIFEST, MARKER) and not any(part.startswith(".") for part in path.split("/"))


def folder_digest(entries: Iterable[FileEntry]) -> str:
    """The folder digest of the contract above (the manifest file itself must not be among `entries`)."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        digest.update(f"{entry.path}\t{entry.size}\t{entry.sha256}\n".encode())
    return "sha256:" + digest.hexdigest()


def metadata_missing(names: set[str], *, checkpoint: bool, fmt: str | None = None) -> list[str]:
    """What a model or checkpoint folder lacks to be loadable: config, weights, tokenizer, trainer state, marker.

    `fmt` is the format the manifest declares: a Transformers folder (the default, what the trainer writes),
    `torch-state-dict` (a plain PyTorch model such as the quick start's, loaded by its own code: a weights file),
    or `keras` (a whole Keras model, `keras.saving.load_model`: a `.keras` file).
    """
    if fmt == TORCH_STATE_DICT and not checkpoint:
        return [] if any(name.endswith(TORCH_WEIGHTS) for name in names) else ["weights (a .pt or .pth file)"]
    if fmt == KERAS and not checkpoint:
        return [] if any(name.endswith(KERAS_FILES) for name in names) else ["the model (a .keras file)"]
    missing = []
    if "config.json" not in names and "adapter_config.json" not in names:
        missing.append("config (config.json or adapter_config.json)")
    if not any(name in names for name in WEIGHTS):
        missing.append("weights")
    if not any(name in names for name in TOKENIZER):
        missing.append("tokenizer")
    if checkpoint:
        if "trainer_state.json" not in names:
            missing.append("trainer state (trainer_state.json)")
        if MARKER not in names:
            missing.append(f"completion marker ({MARKER})")
    return missing


@dataclass
class FolderCheck:
    """A checkpoint or the final model folder, as found in the store and checked."""

    name: str
    path: str
    step: int | None
    size: int
    files: int
    recorded_digest: str | None = None
    store_digest: str | None = None
    manifest_digest: str | None = None
    missing: list[str] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)
    hashed: bool = False

    @property
    def complete(self) -> bool:
        """Every part a load needs is there."""
        return not self.missing

    @property
    def problems(self) -> list[str]:
        """Why this folder does not check out (empty when it does)."""
        problems = [f"missing {part}" for part in self.missing]
        if self.recorded_digest is None and self.manifest_digest is None:
            problems.append("no digest recorded by the trainer")
        if self.hashed and self.store_digest is not None:
            for what, expected in (("recorded", self.recorded_digest), ("manifest", self.manifest_digest)):
                if expected is not None and expected != self.store_digest:
                    problems.append(f"content differs from the {what} digest {short(expected)}")
        if self.changed_files:
            problems.append("changed since written: " + ", ".join(self.changed_files[:5]))
        return problems


def short(digest: str | None) -> str:
    """`sha256:1a2b3c4d…` for display."""
    if not digest:
        return "—"
    algo, _, hexpart = digest.partition(":")
    return f"{algo}:{hexpart[:12]}" if hexpart else digest[:19]


def group_folders(paths: Iterable[tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
    """Files under `outputs/checkpoint-N/` and `outputs/model/` by folder (`checkpoint-N`, `model`), relative."""
    folders: dict[str, list[tuple[str, int]]] = {}
    for path, size in paths:
        match = _CHECKPOINT_RE.match(path)
        if match:
            folders.setdefault(match.group(1), []).append((path[match.end() :], size))
        elif path.startswith("outputs/model/"):
            folders.setdefault("model", []).append((path[len("outputs/model/") :], size))
    return folders


def checkpoint_step_of(name: str) -> int | None:
    """The step of `checkpoint-N`, None for another folder."""
    match = re.fullmatch(r"checkpoint-([0-9]+)", name)
    return int(match.group(1)) if match else None


def manifest_changes(manifest: Mapping[str, Any] | None, found: Mapping[str, FileEntry]) -> list[str]:
    """Files whose size or sha256 in the store differs from the manifest's, or that one side lacks."""
    if not manifest:
        return []
    listed = {str(item.get("path")): item for item in manifest.get("files") or [] if isinstance(item, dict)}
    changed = []
    for path, item in listed.items():
        entry = found.get(path)
        if entry is None:
            changed.append(f"{path} (gone)")
        elif entry.size != item.get("size") or (entry.sha256 and entry.sha256 != item.get("sha256")):
            changed.append(path)
    changed += [f"{path} (not in manifest)" for path in found if path not in listed]
    return sorted(changed)


@dataclass
class EvalCheck:
    """`outputs/eval_results.json`: its metrics, its contract hash against the run's, its digest."""

    present: bool
    metrics: dict[str, float] = field(default_factory=dict)
    contract_hash: str | None = None
    expected_contract_hash: str | None = None
    recorded_digest: str | None = None
    store_digest: str | None = None
    size: int = 0
    # A harness suite's contract (bot.outputs.harness): what its results section got wrong, and each task's hash.
    harness_problems: list[str] = field(default_factory=list)
    task_hashes: dict[str, str] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        """Why the eval results do not check out (empty when they do, or when the run has no contract)."""
        if not self.expected_contract_hash:
            return []
        if not self.present:
            return ["no eval_results.json although the recipe has an eval contract"]
        problems = list(self.harness_problems)
        if self.contract_hash != self.expected_contract_hash:
            problems.append(
                f"eval contract {short(self.contract_hash)} differs from the run's {short(self.expected_contract_hash)}"
            )
        if self.recorded_digest and self.store_digest and self.recorded_digest != self.store_digest:
            problems.append(f"eval_results.json differs from the recorded digest {short(self.recorded_digest)}")
        return problems


@dataclass
class OutputsReport:
    """Everything `/finetune outputs` found and judged."""

    run_name: str
    status: str
    checkpoints: list[FolderCheck]
    model: FolderCheck | None
    eval: EvalCheck
    log_bytes: int
    # An evaluation run's outputs are its results: no model folder is wanted (bot.runs.kinds, kind `eval`).
    needs_model: bool = True

    @property
    def unhashed_bytes(self) -> int:
        """Bytes of the folders checked by size only (over the hash budget)."""
        return sum(c.size for c in [*self.checkpoints, *([self.model] if self.model else [])] if not c.hashed)

    @property
    def problems(self) -> list[str]:
        """Every reason the outputs do not check out, each naming its folder."""
        problems = [f"{c.name}: {p}" for c in self.checkpoints for p in c.problems]
        if self.model is not None:
            problems += [f"model: {p}" for p in self.model.problems]
        problems += [f"eval results: {p}" for p in self.eval.problems]
        return problems

    @property
    def confirmed(self) -> bool:
        """A succeeded run whose final model and eval results (when it has a contract) were read back and checked."""
        if not self.needs_model:
            return self.status == "succeeded" and self.eval.present and not self.problems
        return (
            self.status == "succeeded"
            and self.model is not None
            and self.model.manifest_digest is not None
            and not self.problems
        )

    def summary(self) -> dict[str, Any]:
        """What is stored on the run (`runs.outputs_check`) and shown on its card."""
        return {
            "confirmed": self.confirmed,
            "checkpoints": len(self.checkpoints),
            "complete_checkpoints": sum(1 for c in self.checkpoints if c.complete and not c.problems),
            "model_digest": self.model.store_digest if self.model else None,
            "eval_contract_hash": self.eval.contract_hash,
            **({"eval_task_hashes": self.eval.task_hashes} if self.eval.task_hashes else {}),
            "problems": self.problems[:10],
        }
