"""The sweep summary's picture: the eval metric against each swept key, one panel each (matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.runs.pictures import render_png
from bot.sweeps.board import TrialRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_space(rows: Sequence[TrialRow], space: Sequence[dict[str, Any]], metric: str) -> bytes | None:
    """A PNG with one panel per swept key (its values on x, the final metric on y, the best marked); None if empty."""
    final = [row for row in rows if row.final and row.metric is not None]
    if not final:
        return None

    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, len(space), squeeze=False)
        for ax, axis in zip(axes[0], space, strict=True):
            key = str(axis["key"])
            numeric = all(isinstance(row.values.get(key), int | float) for row in final)
            xs: list[Any] = [row.values.get(key) for row in final]
            if not numeric:
                labels = sorted({str(x) for x in xs})
                xs = [labels.index(str(x)) for x in xs]
                ax.set_xticks(range(len(labels)), labels)
            ys = [row.metric for row in final]
            ax.scatter(xs, ys, color="tab:blue")
            for x, row in zip(xs, final, strict=True):
                if row.rank == 1:
                    ax.scatter([x], [row.metric], color="tab:orange", s=120, marker="*", label=f"best: {row.name}")
            if numeric and axis.get("kind") == "loguniform":
                ax.set_xscale("log")
            ax.set_xlabel(key)
            ax.set_ylabel(metric)
            ax.set_title(f"{metric} vs {key}")
            ax.legend(fontsize="small")

    return render_png((4.5 * len(space), 3.5), draw)
