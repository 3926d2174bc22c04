"""Content digests: of local folders and files (as the trainer computes them) and of the eval contract."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")  # trainer.data.DATA_SUFFIXES


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _content_files(path: Path, suffixes: tuple[str, ...] | None) -> list[Path]:
    if path.is_file():
        return [path]
    files = []
    for candidate in path.rglob("*"):
        if not candidate.is_file() or "__pycache__" in candidate.parts:
            continue
        if suffixes is not None and candidate.suffix not in suffixes:
            continue
        files.append(candidate)
    return sorted(files)


def content_digest(path: Path, suffixes: tuple[str, ...] | None = None, cache: dict[Any, str] | None = None) -> str:
    """`sha256:<hex>` over `<sha256 of file>  <relative path>\\n` lines (sha256sum format) of a file or folder.

    With `suffixes=DATA_SUFFIXES` this is exactly `trainer.data.dataset_digest`, which the trainer
    verifies for local data.
    """
    root = path if path.is_dir() else path.parent
    lines = []
    for file in _content_files(path, suffixes):
        stat = file.stat()
        key = (str(file), stat.st_size, stat.st_mtime_ns)
        if cache is not None and key in cache:
            file_hash = cache[key]
        else:
            file_hash = sha256_file(file)
            if cache is not None:
                cache[key] = file_hash
        lines.append(f"{file_hash}  {file.relative_to(root).as_posix()}\n")
    return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def eval_contract_hash(fields: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of the canonical JSON of the contract fields (same as `trainer.evaluation.contract_hash`)."""
    canonical = dict(fields)
    canonical["metrics"] = sorted(set(canonical["metrics"]))
    payload = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()
