"""The sweep summary's picture: the eval metric against each swept key, one panel each (matplotlib).

Trials at the same value of a key with the same metric (two at 1.0) are set side by side, a few points apart on
the screen, so each is a dot of its own; their values stay where they were. The best is starred, and the legend
says its swept values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from bot.grammar import scalar_text
from bot.runs.pictures import render_png
from bot.sweeps.board import TrialRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# How far apart, in points (1/72 inch), trials with the same value and metric are drawn.
DODGE_PT = 10.0


def plot_space(rows: Sequence[TrialRow], space: Sequence[dict[str, Any]], metric: str) -> bytes | None:
    """A PNG with one panel per swept key (its values on x, the final metric on y, the best marked); None if empty."""
    if not any(row.final and row.metric is not None for row in rows):
        return None
    return render_png((4.5 * len(space), 3.5), partial(draw_space, rows=rows, space=space, metric=metric))


def draw_space(fig: Figure, *, rows: Sequence[TrialRow], space: Sequence[dict[str, Any]], metric: str) -> None:
    """Draw the sweep's panels on `fig` (what `plot_space` renders)."""
    final = [row for row in rows if row.final and row.metric is not None]
    keys = [str(axis["key"]) for axis in space]
    axes = fig.subplots(1, len(space), squeeze=False)
    for ax, axis in zip(axes[0], space, strict=True):
        key = str(axis["key"])
        numeric = all(isinstance(row.values.get(key), int | float) for row in final)
        xs: list[Any] = [row.values.get(key) for row in final]
        if not numeric:
            labels = sorted({str(x) for x in xs})
            xs = [labels.index(str(x)) for x in xs]
            ax.set_xticks(range(len(labels)), labels)
        _dodged(ax, fig, xs, final, keys)
        if numeric and axis.get("kind") == "loguniform":
            ax.set_xscale("log")
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} vs {key}")
        ax.legend(fontsize="small")


def _dodged(ax: Axes, fig: Figure, xs: Sequence[Any], final: Sequence[TrialRow], keys: Sequence[str]) -> None:
    """Each trial's dot at (x, metric), shifted sideways on the screen among trials at the same place."""
    from matplotlib.transforms import ScaledTranslation

    same: dict[tuple[Any, float], list[tuple[TrialRow, float]]] = defaultdict(list)
    for x, row in zip(xs, final, strict=True):
        if row.metric is not None:
            same[(x, row.metric)].append((row, row.metric))
    for (x, _), group in same.items():
        for place, (row, y) in enumerate(group):
            # Drawn at its values (so the axes' limits and a log scale see them), then moved on the screen only.
            shift = ScaledTranslation((place - (len(group) - 1) / 2) * DODGE_PT / 72, 0, fig.dpi_scale_trans)
            dots = [ax.scatter([x], [y], color="tab:blue")]
            if row.rank == 1:
                values = " · ".join(f"{key}={scalar_text(row.values.get(key))}" for key in keys)
                label = f"best: {values} ({row.name})" if values else f"best: {row.name}"
                dots.append(ax.scatter([x], [y], color="tab:orange", s=120, marker="*", label=label))
            for dot in dots:
                dot.set_offset_transform(ax.transData + shift)
