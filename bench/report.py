"""Regenerate the figures of docs/benchmarks.md with one command, each with its date, commit and load.

    .venv/bin/python -m bench.report                                  # scale, digest, watcher (~10 min on 2 cores)
    .venv/bin/python -m bench.report --only watcher --quick           # smaller sizes, to try it
    .venv/bin/python -m bench.report --only ack,ack-postgres,memory,trainer   # the heavy ones, ~5-15 min each

Each bench runs in a process of its own with `--json`; its table replaces what stands between
`<!-- bench.report:begin NAME -->` and `<!-- bench.report:end NAME -->` in docs/benchmarks.md, under a line that
says when it ran, at which commit (`+dirty` when tracked files differ from it), by which command, and the load
average before and after. Everything outside the markers is left as it is; a section whose bench did not run
keeps its figures and their stamp. The heavy benches are off unless named in `--only`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report_tables import (  # noqa: E402 (after the path: run as a script too)
    Stamp,
    render_ack,
    render_digest,
    render_memory,
    render_rows,
    render_scale,
    render_trainer,
    render_watcher,
)
from bench.verdict import load  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Bench:
    """One bench as the report runs it: its module, its arguments (full and `--quick`), its table."""

    module: str
    args: tuple[str, ...]
    quick: tuple[str, ...]
    render: Callable[[dict[str, Any]], list[str]]
    heavy: bool = False  # over ~5 minutes: run only when named in --only


BENCHES: dict[str, Bench] = {
    "scale": Bench("bench.scale", (), ("--sizes", "10", "1000", "--repeats", "3"), render_scale),
    "digest": Bench("bench.digest", (), ("--runs", "2000", "--recent", "100", "--repeats", "5"), render_digest),
    "watcher": Bench("bench.watcher", (), ("--sizes", "1", "20", "1000", "--real-max", "20"), render_watcher),
    "ack": Bench("bench.ack", (), ("--rounds", "2", "--burst", "30", "--run-burst", "10"), render_ack, heavy=True),
    "ack-postgres": Bench(
        "bench.ack",
        ("--database", "postgres"),
        ("--database", "postgres", "--rounds", "2", "--burst", "30", "--run-burst", "10"),
        render_ack,
        heavy=True,
    ),
    "rows": Bench("bench.rows", (), ("--size-mb", "32", "--rounds", "3"), render_rows, heavy=True),
    "memory": Bench("bench.memory", (), ("--commands", "2000", "--every", "500"), render_memory, heavy=True),
    "trainer": Bench(
        "bench.trainer",
        ("--rounds", "12", "--threads", "1"),
        ("--rounds", "2", "--threads", "1"),
        render_trainer,
        heavy=True,
    ),
}


def marker(name: str, end: bool = False) -> str:
    """The comment that opens (or closes) a bench's generated section."""
    return f"<!-- bench.report:{'end' if end else 'begin'} {name} -->"


def replace_section(doc: str, name: str, lines: list[str]) -> str:
    """`doc` with the text between NAME's markers replaced by `lines`; everything else byte for byte."""
    begin, end = marker(name), marker(name, end=True)
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
    found = pattern.findall(doc)
    if len(found) != 1:
        raise ValueError(f"{len(found)} sections marked {begin!r} … {end!r} in the document (expected 1)")
    body = "\n".join([begin, *lines, end])
    return pattern.sub(lambda _: body, doc)


def section(stamp: Stamp, table: list[str]) -> list[str]:
    """A generated section: the stamp, then the table."""
    return [stamp.line(), "", *table]


def commit() -> str:
    """The short commit of the checkout, `+dirty` when tracked files differ from it."""
    head = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def run(name: str, bench: Bench, *, quick: bool, code: str, tmp: Path) -> tuple[dict[str, Any], Stamp]:
    """Run one bench in its own process; its figures (its --json) and the stamp to print beside them."""
    out = tmp / f"{name}.json"
    args = [*(bench.quick if quick else bench.args)]
    shown = " ".join(["python", "-m", bench.module, *args])
    print(f"bench.report: {shown}", file=sys.stderr, flush=True)
    before = load()
    started = datetime.now(UTC)
    env = os.environ | {"POLYAXON_NO_CONFIG": "true"}
    result = subprocess.run([sys.executable, "-m", bench.module, *args, "--json", str(out)], cwd=REPO, env=env)
    after = load()
    if not out.exists():
        raise SystemExit(f"bench.report: {shown} wrote no figures (exit status {result.returncode})")
    stamp = Stamp(f"{started:%Y-%m-%d %H:%M} UTC", code, shown, before, after)
    return json.loads(out.read_text()), stamp


def chosen(only: str | None) -> list[str]:
    """The benches to run: those named (any, heavy ones included), else every light one."""
    if only is None:
        return [name for name, bench in BENCHES.items() if not bench.heavy]
    names = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in names if name not in BENCHES]
    if unknown:
        raise SystemExit(f"bench.report: no bench named {', '.join(unknown)} (known: {', '.join(BENCHES)})")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benches and rewrite their sections of the document."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(BENCHES)} (default: the light ones)")
    parser.add_argument("--quick", action="store_true", help="small sizes (the stamp shows the command)")
    parser.add_argument("--doc", type=Path, default=DOC, help="the document to rewrite")
    args = parser.parse_args(argv)
    names = chosen(args.only)
    doc = args.doc.read_text(encoding="utf-8")
    for name in names:  # every section must be there before an hour of benches runs
        replace_section(doc, name, [])
    code = commit()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        for name in names:
            bench = BENCHES[name]
            data, stamp = run(name, bench, quick=args.quick, code=code, tmp=Path(tmp))
            doc = replace_section(doc, name, section(stamp, bench.render(data)))
            args.doc.write_text(doc, encoding="utf-8")  # each bench's figures kept as soon as they are in
            print(f"bench.report: {name} written to {args.doc}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
