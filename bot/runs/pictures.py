"""PNG pictures drawn with matplotlib, one at a time in the process (the comparison's and a sweep's).

Matplotlib is not thread-safe, not even on Figures of their own: text layout shares caches and the mathtext parser
(pyparsing), and two threads drawing log-scale tick labels at once failed with a ParseException
(tests/bot/runs/test_plots.py). A comparison is drawn on the work pool and a sweep's summary on the watcher, so they
can meet: every picture is drawn under one lock. Each is a bare `Figure` rather than pyplot, which would add its
global current-figure state and a backend switch; `savefig` writes the PNG through Agg either way.
"""

from __future__ import annotations

import io
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The library's state is the process's, so is its lock.
_DRAWING = threading.Lock()


def render_png(size: tuple[float, float], draw: Callable[[Figure], None]) -> bytes:
    """`draw(figure)` on a fresh figure of `size` inches, as a PNG at 100 dpi."""
    from matplotlib.figure import Figure

    with _DRAWING:
        figure = Figure(figsize=size)
        draw(figure)
        with warnings.catch_warnings():
            # "Tight layout not applied" (long legend entries on a narrow figure) is cosmetic: the picture is
            # drawn with the default margins, never refused.
            warnings.simplefilter("ignore", UserWarning)
            figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
