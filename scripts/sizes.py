"""Module and class sizes: every source module over the line budget and every class over its own.

    .venv/bin/python scripts/sizes.py [PATH …]      (default: bot handlers storage trainer)

Prints the offenders (and, with --all, every module and class) and exits 1 when there are any, so
`tests/test_layout.py` can hold the tree to the budget. Lines are physical lines of the file (modules)
and of the class statement through its last line (classes).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

MODULE_BUDGET = 400
CLASS_BUDGET = 250
DEFAULT_ROOTS = ("bot", "handlers", "storage", "trainer")
# Generated Alembic revisions are data, not code anyone grows by hand.
SKIP_PARTS = frozenset({"migrations", "__pycache__"})


def source_files(roots: list[Path]) -> Iterator[Path]:
    """Python files under `roots`, generated migrations left out."""
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            if not SKIP_PARTS & set(path.parts):
                yield path


def class_sizes(path: Path) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every class in a module, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                yield name, (child.end_lineno or child.lineno) - start + 1
                yield from walk(child, name + ".")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, f"{prefix}{child.name}.")

    yield from walk(tree, "")


def offenders(roots: list[Path], *, show_all: bool = False) -> list[str]:
    """Lines describing modules and classes over budget (every one with `show_all`)."""
    out: list[str] = []
    for path in source_files(roots):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if show_all or lines > MODULE_BUDGET:
            out.append(f"module {path}: {lines} lines")
        for name, size in class_sizes(path):
            if show_all or size > CLASS_BUDGET:
                out.append(f"class {path}::{name}: {size} lines")
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the offenders; 1 when there are any."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--all", action="store_true", help="list every module and class, not only offenders")
    args = parser.parse_args(argv)
    roots = args.paths or [Path(p) for p in DEFAULT_ROOTS]
    found = offenders(roots, show_all=args.all)
    print("\n".join(found) if found else "all modules and classes within budget")
    return 1 if found and not args.all else 0


if __name__ == "__main__":
    sys.exit(main())
