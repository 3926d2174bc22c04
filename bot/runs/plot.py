"""The comparison's picture: each metric's history by step, one line per run, as a PNG. Pure apart from matplotlib."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.runs.pictures import render_png

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Points = list[tuple[int, float]]


def plot_histories(
    histories: Mapping[str, Mapping[str, Points]], metrics: Sequence[str], *, exploratory: bool
) -> bytes | None:
    """One panel per metric with a line per run (`histories[run name][metric]`); None when nothing was plotted."""
    if not any(by_metric.get(metric) for by_metric in histories.values() for metric in metrics):
        return None  # nothing to draw: no figure at all

    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, len(metrics), squeeze=False)[0]
        for ax, metric in zip(axes, metrics, strict=True):
            drawn = False  # a panel may still be empty: another metric has the points
            for run_name, by_metric in histories.items():
                points = by_metric.get(metric) or []
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=run_name)
                    drawn = True
            ax.set_title(metric)
            ax.set_xlabel("step")
            if drawn:  # a legend of an empty panel is only matplotlib's warning
                ax.legend(fontsize="small")
        if exploratory:
            fig.suptitle("EXPLORATORY — different eval contracts", color="red")

    return render_png((5 * len(metrics), 3.5), draw)
