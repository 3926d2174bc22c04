"""The catalog's pinned datasets (`manifests/datasets/NAME.yaml`), each with its TRL format, checked against its rows.

An entry names a local folder (one file per split, pinned by content digest when a run is planned) or a hub
dataset (id, commit and content digest), and declares its format (`bot.catalog.formats`). A local dataset is
checked whole when the catalog loads: every `.jsonl`/`.json` split file, every line valid JSON, every row in the
declared format (`split_formats` names a split whose format differs, as KTO's evaluation pairs beside its unpaired
training rows), with `datarows`, the rules the trainer checks rows with too. What is wrong is kept on the entry,
naming the file and line, and refuses the recipes on it when they are planned; the rest of the catalog works. A
recipe names an entry with `dataset: {name: NAME}`; `dataset=NAME` on the command line chooses another entry where
the recipe allows it, never a free path or URL.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.catalog.errors import CatalogError
from bot.catalog.files import read_named
from datarows import DataFormat, SplitReport, check_file

FormatName = Literal[
    "language_modeling",
    "prompt_only",
    "prompt_completion",
    "preference",
    "implicit_preference",
    "unpaired_preference",
]
_ROW_SUFFIXES = (".jsonl", ".json")  # whose rows the catalog reads; parquet and csv are taken as declared


class DatasetFile(BaseModel):
    """The schema of `manifests/datasets/NAME.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    path: str | None = None
    build: str | None = None
    id: str | None = None
    revision: str | None = None
    digest: str | None = None
    format: FormatName
    conversational: bool = False
    split_formats: dict[str, FormatName] = {}
    # A hub dataset's splits (a local one's are its files): a run that chose it must name one of them.
    splits: list[str] = []


@dataclass(frozen=True)
class DatasetEntry:
    """A loaded entry: its schema, file, the columns of each checked split and what is wrong with its rows."""

    spec: DatasetFile
    file: str
    columns: dict[str, tuple[str, ...]]  # split -> columns of its first row (local data that is built)
    # `FILE:LINE: what was expected`, the first few per split file and how many more: the recipes on it are refused.
    problems: tuple[str, ...] = ()
    rows: dict[str, int] = field(default_factory=dict)  # split -> rows checked
    row_bytes: dict[str, float] = field(default_factory=dict)  # split -> mean bytes of a row (an estimate's length)

    @property
    def name(self) -> str:
        """The entry's name."""
        return self.spec.name

    def format_of(self, split: str) -> DataFormat:
        """The format of `split` as declared."""
        name = self.spec.split_formats.get(split, self.spec.format)
        return DataFormat(name, self.spec.conversational)

    @property
    def split_names(self) -> list[str]:
        """The splits it has: a local dataset's files, else those declared (empty: not known)."""
        return list(self.columns) or list(self.spec.splits)

    def columns_of(self, split: str) -> tuple[str, ...]:
        """The columns `split` has: read from its first row when local and built, else the declared format's."""
        return self.columns.get(split) or self.format_of(split).columns

    @property
    def checked(self) -> bool:
        """Whether its rows were read (a local dataset that is built)."""
        return bool(self.columns) or bool(self.problems)


class RowCache:
    """Split reports by the file's content digest and the format it was checked against: a catalog loaded again over
    unchanged data reads no row twice. The digest itself is remembered by the file's size and modification time,
    so an unchanged file is not even hashed again. Shared by the loads of one process (the catalog's reloads)."""

    def __init__(self) -> None:
        self._reports: dict[tuple[str, DataFormat], SplitReport] = {}
        self._digests: dict[Path, tuple[tuple[int, int, int], str]] = {}
        self._lock = threading.Lock()
        self.checked = 0  # files read and checked (not served from the cache)

    def report(self, file: Path, expected: DataFormat) -> SplitReport:
        """The file's rows checked against `expected` (from the cache when its content was checked before)."""
        key = (self.digest(file), expected)
        with self._lock:
            cached = self._reports.get(key)
        if cached is not None:
            return cached
        report = check_file(file, expected)
        with self._lock:
            self._reports[key] = report
            self.checked += 1
        return report

    def digest(self, file: Path) -> str:
        """`sha256:` of the file's bytes, remembered while its size and modification time stay."""
        stat = file.stat()
        signature = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            known = self._digests.get(file)
        if known is not None and known[0] == signature:
            return known[1]
        sha = hashlib.sha256()
        with file.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                sha.update(chunk)
        digest = "sha256:" + sha.hexdigest()
        with self._lock:
            self._digests[file] = (signature, digest)
        return digest


def load_datasets(root: Path, rows: RowCache | None = None) -> dict[str, DatasetEntry]:
    """Every `datasets/*.yaml` under the catalog folder `root`, checked against its data where it is local."""
    cache = rows or RowCache()
    entries: dict[str, DatasetEntry] = {}
    for path in sorted((root / "datasets").glob("*.yaml")):
        rel = path.relative_to(root).as_posix()
        entry = _load_entry(path, rel, root.parent, cache)
        entries[entry.name] = entry
    return entries


def _load_entry(path: Path, rel: str, repo_root: Path, rows: RowCache) -> DatasetEntry:
    spec = read_named(path, rel, DatasetFile)
    if (spec.path is None) == (spec.id is None):
        raise CatalogError(rel, "path", "give either `path` (local, pinned by content digest) or `id`")
    folder = (repo_root / spec.path) if spec.path is not None else None
    if folder is None or not folder.is_dir():
        return DatasetEntry(spec=spec, file=rel, columns={})
    return _checked(spec, rel, folder, rows)


def local_entry(path: str, repo_root: Path, rows: RowCache, *, used_by: str) -> DatasetEntry | None:
    """A recipe's local dataset folder that no catalog entry names, checked whole against the format each file's
    first row makes (a recipe cannot declare one); None when it is not built."""
    folder = Path(path) if Path(path).is_absolute() else repo_root / path
    if not folder.is_dir():
        return None
    first = next((f for f in sorted(folder.iterdir()) if f.suffix in _ROW_SUFFIXES), None)
    found = check_file(first).found if first is not None else None
    spec = DatasetFile(
        name=path,
        description=f"the local dataset of {used_by}",
        path=path,
        format=found.name if found is not None else "language_modeling",
        conversational=found.conversational if found is not None else False,
    )
    return _checked(spec, used_by, folder, rows)


def _checked(spec: DatasetFile, rel: str, folder: Path, rows: RowCache) -> DatasetEntry:
    columns: dict[str, tuple[str, ...]] = {}
    counts: dict[str, int] = {}
    sizes: dict[str, float] = {}
    problems: list[str] = []
    files = sorted(p for p in folder.iterdir() if p.suffix in _ROW_SUFFIXES)
    if not files:
        problems.append(f"{spec.path}: no split files (one `SPLIT.jsonl` per split: train.jsonl, eval.jsonl, …)")
    for file in files:
        split = file.stem
        declared = DataFormat(spec.split_formats.get(split, spec.format), spec.conversational)
        report = rows.report(file, declared)
        columns[split] = report.columns
        counts[split] = report.rows
        if report.mean_row_bytes is not None:
            sizes[split] = report.mean_row_bytes
        shown = f"{spec.path}/{file.name}"
        problems += report.describe(shown)
        if report.found is not None and report.found != declared and report.problem_count:
            field_name = f"split_formats.{split}" if split in spec.split_formats else "format"
            problems.append(
                f"{rel}: {field_name} declares {declared.describe()}, but the rows of {shown} are "
                f"{report.found.describe()}"
            )
    unknown = sorted(set(spec.split_formats) - set(columns)) if columns else []
    if unknown:
        raise CatalogError(
            rel, "split_formats", f"no split {unknown[0]!r} in {spec.path} (splits: {', '.join(columns)})"
        )
    return DatasetEntry(spec=spec, file=rel, columns=columns, problems=tuple(problems), rows=counts, row_bytes=sizes)


def split_problem(entry: DatasetEntry, split: str, *, who: str) -> str | None:
    """Why `split` of a checked local dataset cannot be read (its file is missing), or None."""
    if not entry.checked or split in entry.columns:
        return None
    files = ", ".join(f"{name}.jsonl" for name in entry.columns) or "none"
    return (
        f"dataset {entry.name} has no split {split!r}: {entry.spec.path}/{split}.jsonl is missing "
        f"(its split files: {files}); {who}"
    )


def data_refusal(recipe: str, uses: list[tuple[DatasetEntry, str, str]]) -> str | None:
    """Why a run of `recipe` cannot be planned on its data: the splits it reads that are missing, the rows that are
    not in their format (each `FILE:LINE: …`); None when its data checks out (or is not local, or not built).

    `uses`: (the dataset, the split read, what reads it: "trains on", "evaluates on")."""
    lines: list[str] = []
    seen: set[str] = set()
    for entry, split, what in uses:
        missing = split_problem(entry, split, who=f"recipe {recipe} {what} it")
        if missing:
            lines.append(missing)
        if entry.problems and entry.name not in seen:
            seen.add(entry.name)
            lines += list(entry.problems)
    if not lines:
        return None
    shown = "\n".join(f"• {line}" for line in lines)
    return (
        f"recipe {recipe} cannot run on its data; nothing was submitted. What is wrong, file and line:\n{shown}\n"
        "Fix the files: the catalog checks them again when they change."
    )
