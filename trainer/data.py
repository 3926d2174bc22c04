"""Dataset loading by id + revision or by local path, and the data digest that pins local data.

Local data follows one rule: a file is one split (named by `split`); a folder holds one file per split,
named after the split (`train.jsonl`, `eval.jsonl`, ...; `.jsonl`, `.json`, `.parquet`, `.csv`).
Anything else is a hub dataset id loaded with `datasets.load_dataset(name, revision=...)` (from the
local cache when `HF_HUB_OFFLINE=1`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


class DatasetError(ValueError):
    """The dataset cannot be found, or its files do not match the pinned digest."""


class DatasetRowError(DatasetError):
    """Rows of the dataset are not in the trainer's format: which, where, and what was expected."""


def data_files(path: Path) -> list[Path]:
    """Return the data files of a local dataset (the file itself, or the folder's data files, sorted)."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)


def dataset_digest(path: Path) -> str:
    """Return `sha256:<hex>` of a local dataset.

    Algorithm: for each data file (see `data_files`, sorted by its path relative to `path`, which is
    the file name for a single file), the line `"<sha256 hex of the file bytes>  <relative path>\\n"`
    (the `sha256sum` format, POSIX separators); the digest is the sha256 of those lines, UTF-8 encoded.
    """
    root = path if path.is_dir() else path.parent
    lines = []
    for file in data_files(path):
        file_hash = hashlib.sha256(file.read_bytes()).hexdigest()
        lines.append(f"{file_hash}  {file.relative_to(root).as_posix()}\n")
    return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def verify_digest(path: Path, expected: str) -> str:
    """Check a local dataset against `expected` (`sha256:<hex>` or bare hex) and return the actual digest."""
    actual = dataset_digest(path)
    if expected and expected.removeprefix("sha256:") != actual.removeprefix("sha256:"):
        raise DatasetError(f"dataset {path} has digest {actual}, the recipe pins {expected}")
    return actual


def _local_split_file(path: Path, split: str) -> Path:
    if path.is_file():
        return path
    for suffix in DATA_SUFFIXES:
        candidate = path / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    available = sorted({p.stem for p in data_files(path)})
    raise DatasetError(f"dataset folder {path} has no split {split!r} (splits: {', '.join(available) or 'none'})")


def load_split(name: str, revision: str, split: str) -> Any:
    """Load one split of a dataset given by hub id + revision or by local path, every row checked first (a local
    JSON file before it is parsed by `datasets`, so a line that is not JSON is named by its line)."""
    from datasets import load_dataset

    path = Path(name)
    if path.exists():
        file = _local_split_file(path, split)
        builder = _BUILDERS.get(file.suffix)
        if builder is None:
            raise DatasetError(f"unsupported data file {file} (expected one of {', '.join(DATA_SUFFIXES)})")
        if file.suffix in (".jsonl", ".json"):
            check_file_rows(file)
        dataset = load_dataset(builder, data_files={split: str(file)}, split=split)
        if file.suffix not in (".jsonl", ".json"):
            check_loaded_rows(dataset, f"{file}")
        return dataset
    dataset = load_dataset(name, revision=revision or None, split=split)
    check_loaded_rows(dataset, f"{name}@{revision or 'latest'} split {split!r}")
    return dataset


def check_file_rows(file: Path) -> None:
    """Every line of a local JSON split in the format its first row makes (`datarows`, the catalog's rules)."""
    from datarows import check_file

    report = check_file(file)
    if not report.ok:
        said = "; ".join(report.describe(str(file)))
        raise DatasetRowError(f"{report.problem_count or 1} bad row(s) of {report.rows}: {said}")


def check_loaded_rows(dataset: Any, where: str) -> None:
    """Every row of a loaded split (a hub dataset, parquet, csv) in the format its first row makes, numbered from 1."""
    from datarows import detect_format, rows_problems

    if len(dataset) == 0:
        raise DatasetRowError(f"{where} has no rows")
    fmt = detect_format(dataset.column_names, dataset[0])
    if fmt is None:
        return  # no TRL format at all: the trainer's own column check says which columns it needs
    problems, count, rows = rows_problems(iter(dataset), fmt)
    if count:
        said = "; ".join(f"{where} row {problem.line}: {problem.message}" for problem in problems)
        more = f" (and {count - len(problems)} more)" if count > len(problems) else ""
        raise DatasetRowError(f"{count} bad row(s) of {rows}: {said}{more}")
