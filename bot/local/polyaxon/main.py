"""Foreground entry for `finetune-bot local-polyaxon [--port P] [--store DIR]`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from bot.local.polyaxon.stack import LocalPolyaxonStack, StackError

DEFAULT_STORE = Path(".finetune/polyaxon")


def main(port: int | None = None, store: Path | str | None = None) -> int:
    """Run the stack in the foreground, print its host, stop everything on SIGTERM/SIGINT."""
    stack = LocalPolyaxonStack(Path(store) if store is not None else DEFAULT_STORE, port=port)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            stack.start()
        except StackError as exc:
            print(f"local-polyaxon: {exc}", file=sys.stderr)
            return 1
        print(stack.host, flush=True)
        print(
            f"local-polyaxon: store {stack.store}; export POLYAXON_HOST={stack.host}; SIGTERM or Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(1.0):
            pass
        return 0
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def cli(argv: list[str] | None = None) -> int:
    """`python -m bot.local.polyaxon [--port P] [--store DIR]`."""
    parser = argparse.ArgumentParser(prog="local-polyaxon", description=main.__doc__)
    parser.add_argument("--port", type=int, default=None, help="API port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--store", type=Path, default=DEFAULT_STORE, help="store folder (default: .finetune/polyaxon)")
    args = parser.parse_args(argv)
    return main(port=args.port, store=args.store)
