"""The comparison's and the sweep's pictures: PNGs drawn on Figures of their own, safe from several threads at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
