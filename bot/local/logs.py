"""Where `finetune-bot local` sends the bot's logs: a file, and the terminal only when asked (`--verbose`).

The terminal stands in for the channel: it shows what a person there would see, and the shell's notes.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def route_logs(path: Path, *, verbose: bool) -> Path:
    """Send every log record (and Python warnings) to `path`, appended; also to stderr when `verbose`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    handlers: list[logging.Handler] = [logging.FileHandler(path, encoding="utf-8")]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    for handler in handlers:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    logging.captureWarnings(True)
    return path
