"""Which catalog a folder holds, and whether it changed: its revision (the git commit of a checkout, `-dirty` when
the folder differs from it; else a content digest) and a fingerprint cheap enough to poll every few seconds."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from bot.catalog.datasets import RowCache

# Files of a catalog folder that say what it holds (its manifests and the data in it).
_SKIPPED = frozenset({"__pycache__", ".git"})


def files_of(folder: Path) -> list[Path]:
    """Every file under the catalog folder, in path order (caches and git's own files left out)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not _SKIPPED & set(p.relative_to(folder).parts))


def fingerprint(folders: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """Each file's path, size and modification time: what changes when a file is added, removed or written (a
    content digest is taken only once it changed, by the load it triggers)."""
    seen: list[tuple[str, int, int]] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for file in files_of(folder):
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue  # removed while listed: the next poll sees the folder without it
            seen.append((str(file), stat.st_size, stat.st_mtime_ns))
    return tuple(seen)


def revision(folder: Path, rows: RowCache) -> str:
    """`git:<short commit>` (`-dirty` when the folder differs from it) for a git checkout, else `sha256:<12 hex>`
    of the folder's files and their content digests."""
    commit = _git(folder, "rev-parse", "--short=12", "HEAD")
    if commit:
        dirty = _git(folder, "status", "--porcelain", "--", ".")
        return f"git:{commit}" + ("-dirty" if dirty else "")
    total = hashlib.sha256()
    for file in files_of(folder):
        total.update(f"{file.relative_to(folder).as_posix()}\t{rows.digest(file)}\n".encode())
    return f"sha256:{total.hexdigest()[:12]}"


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
