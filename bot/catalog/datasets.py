"""The catalog's pinned datasets (`manifests/datasets/NAME.yaml`), each with its TRL format, checked against its rows.

An entry names a local folder (one file per split, pinned by content digest when a run is planned) or a hub
dataset (id, commit and content digest), and declares its format (`bot.catalog.formats`). A local dataset's
format is verified when the catalog loads: the first row of every split file must make the declared format
(`split_formats` names a split whose format differs, as KTO's evaluation pairs beside its unpaired training
rows). A recipe names an entry with `dataset: {name: NAME}`; `dataset=NAME` on the command line chooses another
entry where the recipe allows it, never a free path or URL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from bot.catalog.errors import CatalogError
from bot.catalog.files import read_named
from bot.catalog.formats import DataFormat, detect_format

FormatName = Literal[
    "language_modeling",
    "prompt_only",
    "prompt_completion",
    "preference",
    "implicit_preference",
    "unpaired_preference",
]
_ROW_SUFFIXES = (".jsonl", ".json")  # whose first row the catalog reads; parquet and csv are taken as declared


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
    """A loaded entry: its schema, file and the columns each checked split's first row has."""

    spec: DatasetFile
    file: str
    columns: dict[str, tuple[str, ...]]  # split -> columns of its first row (local data that is built)

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


def load_datasets(root: Path) -> dict[str, DatasetEntry]:
    """Every `datasets/*.yaml` under the catalog folder `root`, verified against its data where it is local."""
    entries: dict[str, DatasetEntry] = {}
    for path in sorted((root / "datasets").glob("*.yaml")):
        rel = path.relative_to(root).as_posix()
        entry = _load_entry(path, rel, root.parent)
        entries[entry.name] = entry
    return entries


def _load_entry(path: Path, rel: str, repo_root: Path) -> DatasetEntry:
    spec = read_named(path, rel, DatasetFile)
    if (spec.path is None) == (spec.id is None):
        raise CatalogError(rel, "path", "give either `path` (local, pinned by content digest) or `id`")
    columns: dict[str, tuple[str, ...]] = {}
    folder = (repo_root / spec.path) if spec.path is not None else None
    if folder is not None and folder.is_dir():
        for file in sorted(p for p in folder.iterdir() if p.suffix in _ROW_SUFFIXES):
            split = file.stem
            row = first_row(file)
            if row is None:
                raise CatalogError(rel, "path", f"{spec.path}/{file.name} has no rows")
            columns[split] = tuple(row)
            declared = DataFormat(spec.split_formats.get(split, spec.format), spec.conversational)
            found = detect_format(row, row)
            if found != declared:
                field = f"split_formats.{split}" if split in spec.split_formats else "format"
                raise CatalogError(
                    rel,
                    field,
                    f"declares {declared.describe()}, but the first row of {spec.path}/{file.name} has columns "
                    f"{', '.join(sorted(row))}" + (f" ({found.describe()})" if found else " (no TRL format)"),
                )
    unknown = sorted(set(spec.split_formats) - set(columns)) if columns else []
    if unknown:
        raise CatalogError(
            rel, "split_formats", f"no split {unknown[0]!r} in {spec.path} (splits: {', '.join(columns)})"
        )
    return DatasetEntry(spec=spec, file=rel, columns=columns)


def first_row(file: Path) -> dict[str, Any] | None:
    """The first row of a `.jsonl` file (or of a `.json` list of rows); None when it has none."""
    with file.open(encoding="utf-8") as handle:
        if file.suffix == ".jsonl":
            for line in handle:
                if line.strip():
                    row = json.loads(line)
                    return row if isinstance(row, dict) else None
            return None
        rows = json.load(handle)
    return rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else None
