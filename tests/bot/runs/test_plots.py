"""The comparison's and the sweep's pictures: PNGs drawn on Figures of their own, safe from several threads at once;
what they show, read from the matplotlib figures (labels, points, legends), not from pixels."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.text import Annotation

from bot.runs.compare_table import CompareRow
from bot.runs.plot import draw_histories, legend_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def test_both_plots_draw_pngs_from_concurrent_threads_without_pyplot() -> None:
    # A process of its own: whether pyplot was imported is a property of the whole interpreter.
    script = textwrap.dedent(
        """
        import sys
        from concurrent.futures import ThreadPoolExecutor

        from bot.runs.plot import plot_histories
        from bot.sweeps.board import TrialRow
        from bot.sweeps.plot import plot_space

        def compare(i):
            steps = [(s, 1.0 / (s + i + 1)) for s in range(0, 40, 5)]
            return plot_histories({f"run-{i}": {"eval_loss": steps}, "other": {"eval_loss": steps[:3]}},
                                  ["eval_loss", "loss"], exploratory=i % 2 == 0)

        def sweep(i):
            rows = [TrialRow(index=k, name=f"t{k}", status="succeeded", values={"lr": 10.0 ** -k, "opt": f"o{k % 2}"},
                             metric=0.1 * k + i, final=True, rank=1 if k == 3 else k + 2) for k in range(1, 5)]
            space = [{"key": "lr", "kind": "loguniform"}, {"key": "opt", "kind": "choice"}]
            return plot_space(rows, space, "eval_accuracy")

        with ThreadPoolExecutor(8) as pool:
            pngs = list(pool.map(compare, range(8))) + list(pool.map(sweep, range(8)))
        assert all(png is not None and png.startswith(b"\\x89PNG\\r\\n\\x1a\\n") and len(png) > 5000 for png in pngs)
        assert len({png for png in pngs[:8]}) > 1  # each thread drew its own figure
        print("pyplot" if "matplotlib.pyplot" in sys.modules else "no pyplot")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "no pyplot", done.stdout


def test_nothing_to_draw_is_no_picture() -> None:
    from bot.runs.plot import plot_histories
    from bot.sweeps.board import TrialRow
    from bot.sweeps.plot import plot_space

    assert plot_histories({"a": {"loss": []}}, ["loss"], exploratory=False) is None
    unfinished = [TrialRow(index=1, name="t1", status="running", values={"lr": 0.1}, metric=None)]
    assert plot_space(unfinished, [{"key": "lr"}], "eval_loss") is None


def figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(10, 3.5))


def legend_texts(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()]


def rows(*params: dict[str, Any]) -> list[CompareRow]:
    return [
        CompareRow(name=f"sft-tiny-{index}a2b", run_id=index, status="succeeded", final=True, params=p)
        for index, p in enumerate(params, start=1)
    ]


def test_every_panel_of_the_comparison_names_its_metric_on_the_y_axis() -> None:
    fig = figure()
    steps = [(s, 1.0 / (s + 1)) for s in range(0, 40, 5)]
    draw_histories(
        fig, histories={"a": {"eval_loss": steps, "loss": steps}}, metrics=["eval_loss", "loss"], exploratory=False
    )
    assert [(ax.get_ylabel(), ax.get_xlabel()) for ax in fig.axes] == [("eval_loss", "step"), ("loss", "step")]


def test_runs_with_the_same_final_value_are_two_dots_side_by_side_each_with_its_value() -> None:
    fig = figure()
    histories = {
        "sft-tiny-1a2b": {"tiny_capitals-acc": [(40, 1.0)], "loss": [(0, 3.0), (40, 1.0)]},
        "sft-tiny-2a2b": {"tiny_capitals-acc": [(40, 1.0)], "loss": [(0, 3.0), (40, 1.2)]},
    }
    labels = {"sft-tiny-1a2b": "learning_rate=2e-05", "sft-tiny-2a2b": "learning_rate=0.003"}
    draw_histories(fig, histories=histories, metrics=["tiny_capitals-acc", "loss"], exploratory=False, labels=labels)
    final, loss = fig.axes
    points = [tuple(xy) for line in final.get_lines() for xy in np.asarray(line.get_xydata()).tolist()]
    assert points == [(0.0, 1.0), (1.0, 1.0)]  # one slot per run: two dots, not one on top of the other
    assert [text.get_text() for text in final.texts] == ["1", "1"]
    assert [tuple(text.xy) for text in final.texts if isinstance(text, Annotation)] == [(0, 1.0), (1, 1.0)]
    assert [tick.get_text() for tick in final.get_xticklabels()] == ["step 40", "step 40"]
    assert final.get_ylabel() == "tiny_capitals-acc"
    assert legend_texts(final) == legend_texts(loss) == ["learning_rate=2e-05", "learning_rate=0.003"]
    # A run keeps its colour from panel to panel.
    assert [line.get_color() for line in final.get_lines()] == [line.get_color() for line in loss.get_lines()]


def test_the_legend_says_what_differs_between_the_runs() -> None:
    differing = rows(
        {"learning_rate": 2e-5, "seed": 1, "max_steps": 40}, {"learning_rate": 3e-3, "seed": 2, "max_steps": 40}
    )
    assert legend_labels(differing) == {
        "sft-tiny-1a2b": "learning_rate=2e-05 · seed=1",
        "sft-tiny-2a2b": "learning_rate=0.003 · seed=2",
    }
    # Nothing differs: the run's name; the same values on two runs: their names too, so no two entries read alike.
    assert legend_labels(rows({"seed": 1}, {"seed": 1})) == {
        "sft-tiny-1a2b": "sft-tiny-1a2b",
        "sft-tiny-2a2b": "sft-tiny-2a2b",
    }
    assert legend_labels(rows({"seed": 1}, {"seed": 1}, {"seed": 2})) == {
        "sft-tiny-1a2b": "seed=1 · sft-tiny-1a2b",
        "sft-tiny-2a2b": "seed=1 · sft-tiny-2a2b",
        "sft-tiny-3a2b": "seed=2",
    }
    # Pins and the contract are not hyperparameters, as in the table.
    assert (
        legend_labels(rows({"seed": 1, "model_name_or_path": "a"}, {"seed": 2, "model_name_or_path": "b"}))[
            "sft-tiny-1a2b"
        ]
        == "seed=1"
    )


def test_sweep_trials_with_the_same_value_and_metric_are_drawn_apart_and_the_best_says_its_values() -> None:
    from bot.sweeps.board import TrialRow
    from bot.sweeps.plot import draw_space

    trials = [
        TrialRow(
            index=1, name="t1", status="succeeded", values={"lr": 0.1, "opt": "adam"}, metric=1.0, final=True, rank=1
        ),
        TrialRow(
            index=2, name="t2", status="succeeded", values={"lr": 0.1, "opt": "sgd"}, metric=1.0, final=True, rank=2
        ),
        TrialRow(
            index=3, name="t3", status="succeeded", values={"lr": 0.2, "opt": "sgd"}, metric=0.5, final=True, rank=3
        ),
    ]
    fig = figure()
    draw_space(fig, rows=trials, space=[{"key": "lr"}, {"key": "opt"}], metric="eval_accuracy")
    fig.draw_without_rendering()
    lr, opt = fig.axes
    assert [ax.get_ylabel() for ax in fig.axes] == ["eval_accuracy", "eval_accuracy"]
    blue = [c for c in lr.collections if str(c.get_label()).startswith("_")]  # the trials' dots, not the best's star
    on_screen = [tuple(c.get_offset_transform().transform(np.asarray(c.get_offsets()))[0].round(1)) for c in blue]
    assert len(on_screen) == 3 and len(set(on_screen)) == 3, on_screen  # t1 and t2 (lr=0.1, 1.0) apart
    assert [tuple(np.asarray(c.get_offsets())[0]) for c in blue] == [
        (0.1, 1.0),
        (0.1, 1.0),
        (0.2, 0.5),
    ]  # values unchanged
    assert legend_texts(lr) == legend_texts(opt) == ["best: lr=0.1 · opt=adam (t1)"]


def test_long_legend_entries_on_a_narrow_figure_still_draw_a_picture() -> None:
    # What a comparison of runs that differ in many keys hands the plot: tight_layout cannot fit its margins and
    # warns (an error under this suite's filterwarnings); the picture is drawn all the same, entries clipped.
    from bot.runs.plot import plot_histories

    params = {f"key_{i}": 10**i for i in range(12)}
    rows = [
        CompareRow(name=f"sft-tiny-{n}", run_id=n, status="succeeded", final=True, params={**params, "seed": n})
        for n in (1, 2)
    ]
    rows[1].params.update({k: v + 1 for k, v in params.items()})
    labels = legend_labels(rows)
    assert all(len(text) <= 60 for text in labels.values()), labels
    histories = {row.name: {"eval_loss": [(1, 2.0), (2, 1.5)], "loss": [(1, 3.0), (2, 2.0)]} for row in rows}
    for given in (labels, {row.name: " · ".join(f"{k}={v}" for k, v in row.params.items()) for row in rows}):
        png = plot_histories(histories, ["eval_loss", "loss"], exploratory=True, labels=given)
        assert png is not None and png.startswith(b"\x89PNG")
