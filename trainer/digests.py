"""The content manifest of an output folder (a checkpoint, the final model): every file, its size and sha256.

`write_manifest(folder)` writes `finetune_files.json` into the folder:

    {"version": 1, "digest": "sha256:<hex>", "files": [{"path": ..., "size": ..., "sha256": ...}, ...]}

The canonical form is a contract: the bot re-computes the digest from the files it downloads, so it must
not change without a new manifest version.

* Listed: every regular file under the folder, recursively; symbolic links are neither followed nor listed.
* Not listed: the manifest itself (`finetune_files.json`), the checkpoint completion marker
  (`finetune_checkpoint.json`, written after the manifest and describing compatibility, not content),
  and any file whose relative path has a component starting with `.` (temporary files of atomic writes).
* `path` is the POSIX path relative to the folder; `size` is in bytes; `sha256` is the lower-case hex
  digest of the file's bytes. Entries are sorted by `path` (Unicode code point order, as Python sorts str).
* `digest` = "sha256:" + lower-case hex sha256 of the UTF-8 text made of one line per entry, in that
  order, `f"{path}\\t{size}\\t{sha256}\\n"` (tab-separated, each line ending in a newline, nothing else).

Only the standard library is used here (the checkpoint marker's name comes from `trainer.checkpoints`,
which is standard library only too).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from trainer.checkpoints import META_FILE

MANIFEST_FILE = "finetune_files.json"
MANIFEST_VERSION = 1
UNLISTED = frozenset({MANIFEST_FILE, META_FILE})
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """Return the lower-case hex sha256 of a file's bytes (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _listed(relative: Path) -> bool:
    if any(part.startswith(".") for part in relative.parts):
        return False
    return relative.as_posix() not in UNLISTED


def file_entries(folder: Path) -> list[dict[str, Any]]:
    """List every regular file under `folder` as {path, size, sha256}, sorted by path (see the module doc)."""
    entries = []
    for root, _dirs, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(folder)
            if path.is_symlink() or not path.is_file() or not _listed(relative):
                continue
            entries.append({"path": relative.as_posix(), "size": path.stat().st_size, "sha256": file_sha256(path)})
    return sorted(entries, key=lambda entry: str(entry["path"]))


def folder_digest(entries: list[dict[str, Any]]) -> str:
    """Return "sha256:<hex>" over one `path<TAB>size<TAB>sha256<LF>` line per entry, in path order."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: str(e["path"])):
        digest.update(f"{entry['path']}\t{entry['size']}\t{entry['sha256']}\n".encode())
    return "sha256:" + digest.hexdigest()


def write_json_atomic(path: Path, document: Any) -> None:
    """Write a JSON document atomically (hidden temporary file, fsync, rename): it is either whole or absent."""
    tmp = path.parent / f".{path.name}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_manifest(folder: Path) -> str:
    """Write `finetune_files.json` into `folder` atomically and return the folder's digest."""
    entries = file_entries(folder)
    digest = folder_digest(entries)
    write_json_atomic(folder / MANIFEST_FILE, {"version": MANIFEST_VERSION, "digest": digest, "files": entries})
    return digest


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """Read a folder's manifest, or None when it is missing, unreadable or of another version."""
    try:
        document = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("version") != MANIFEST_VERSION:
        return None
    return document


def manifest_digest(folder: Path) -> str | None:
    """The digest a folder's manifest records, or None when there is no readable manifest."""
    document = read_manifest(folder)
    digest = document.get("digest") if document else None
    return digest if isinstance(digest, str) else None
