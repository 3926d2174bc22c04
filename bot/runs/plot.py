"""The comparison's picture: each metric by step, one panel per metric, as a PNG. Pure apart from matplotlib.

Every panel names its metric on the y axis. A panel where each run has one value (a final evaluation, as a harness
suite logs it once) shows the runs side by side, one slot each, every value written beside its dot: two runs at
1.0 are two dots, not one. The legend says what differs between the runs (`learning_rate=2e-05 · seed=1`, the
table's columns), and the run's name where nothing differs or two runs would read the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from bot.grammar import scalar_text
from bot.runs.compare_table import CompareRow, differing_params
from bot.runs.pictures import render_png
from bot.slack.blocks import clip

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Points = list[tuple[int, float]]
SEPARATOR = " · "


def legend_labels(rows: Sequence[CompareRow]) -> dict[str, str]:
    """Each run's legend entry by name: the hyperparameters that differ between the runs, as the table shows them;
    the run's name alone where none differs, and after them where two runs would otherwise read the same."""
    keys = differing_params(rows)
    said = {row.name: SEPARATOR.join(f"{key}={_value(row.params.get(key))}" for key in keys) for row in rows}
    counts = Counter(said.values())
    return {
        name: clip(text if text and counts[text] == 1 else SEPARATOR.join(part for part in (text, name) if part), 60)
        for name, text in said.items()
    }


def _value(value: object) -> str:
    """A hyperparameter's value, or — for a run without the key (another trainer's), as the table shows it."""
    return "—" if value is None else scalar_text(value)


def plot_histories(
    histories: Mapping[str, Mapping[str, Points]],
    metrics: Sequence[str],
    *,
    exploratory: bool,
    labels: Mapping[str, str] | None = None,
) -> bytes | None:
    """One panel per metric with a line per run (`histories[run name][metric]`), each run in the legend as
    `labels` names it (else by name); None when nothing was plotted."""
    if not any(by_metric.get(metric) for by_metric in histories.values() for metric in metrics):
        return None  # nothing to draw: no figure at all
    draw = partial(draw_histories, histories=histories, metrics=metrics, exploratory=exploratory, labels=labels)
    return render_png((5 * len(metrics), 3.5), draw)


def draw_histories(
    fig: Figure,
    *,
    histories: Mapping[str, Mapping[str, Points]],
    metrics: Sequence[str],
    exploratory: bool,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Draw the comparison's panels on `fig` (what `plot_histories` renders)."""
    named = dict(labels or {})
    # One colour per run on every panel, whichever panels it has points on.
    colors = {name: f"C{index % 10}" for index, name in enumerate(histories)}
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics, strict=True):
        series = {
            name: points for name, by_metric in histories.items() if (points := list(by_metric.get(metric) or []))
        }
        if series and all(len(points) == 1 for points in series.values()):
            _side_by_side(ax, series, named, colors)
        else:
            for name, points in series.items():
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker=".",
                    color=colors[name],
                    label=named.get(name, name),
                )
            ax.set_xlabel("step")
        ax.set_title(metric)
        ax.set_ylabel(metric)
        if series:  # a legend of an empty panel is only matplotlib's warning
            ax.legend(fontsize="small")
    if exploratory:
        fig.suptitle("EXPLORATORY — different eval contracts", color="red")


def _side_by_side(ax: Axes, series: Mapping[str, Points], labels: Mapping[str, str], colors: Mapping[str, str]) -> None:
    """One value per run: a slot each, left to right, the value written above its dot and its step below."""
    steps = []
    for slot, (name, [(step, value)]) in enumerate(series.items()):
        ax.plot([slot], [value], marker="o", linestyle="none", color=colors[name], label=labels.get(name, name))
        ax.annotate(
            f"{value:.4g}", (slot, value), textcoords="offset points", xytext=(0, 6), ha="center", fontsize="small"
        )
        steps.append(f"step {step}")
    ax.set_xticks(range(len(steps)), steps)
    ax.set_xlim(-0.5, len(steps) - 0.5)
    ax.margins(y=0.25)  # room for the values written above the dots
    ax.set_xlabel("one value per run, side by side")
