"""Where a run's tracking goes: a JSONL file always, and the Polyaxon run the job runs in, when there is one.

Polyaxon is imported only when the run is inside Polyaxon; nothing here imports transformers.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Protocol

from trainer.writes import write

logger = logging.getLogger("trainer.callbacks")


class TrackingSink(Protocol):
    """Where params, metrics, results and artifacts of a run go."""

    def log_params(self, params: dict[str, Any]) -> None:
        """Record the run's resolved configuration, pins and versions (once)."""

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Record metrics at a global step."""

    def log_progress(self, done: float) -> None:
        """Record how far the run is, 0..1 (Polyaxon's UI shows it)."""

    def log_results(self, results: dict[str, Any]) -> None:
        """Record the final results of the run."""

    def log_outputs(self, outputs: dict[str, Any]) -> None:
        """Record run outputs as they become known (merged into the run's outputs)."""

    def log_artifact(self, path: Path, name: str, kind: str) -> None:
        """Record an output artifact (`model` or `file`) with lineage."""

    def close(self) -> None:
        """Flush everything."""


class JsonlSink:
    """Appends one JSON object per event to a local file (flushed per line, so a kill keeps what was logged)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._handle = path.open("a", encoding="utf-8")

    def _write(self, kind: str, **fields: Any) -> None:
        record = {"kind": kind, "time": time.time(), **fields}
        self._handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        self._handle.flush()

    def log_params(self, params: dict[str, Any]) -> None:
        """Write a `params` record."""
        self._write("params", params=params)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Write a `metrics` record."""
        self._write("metrics", step=step, metrics=metrics)

    def log_progress(self, done: float) -> None:
        """Progress is Polyaxon's to show; the JSONL file has the steps."""

    def log_results(self, results: dict[str, Any]) -> None:
        """Write a `results` record."""
        self._write("results", results=results)

    def log_outputs(self, outputs: dict[str, Any]) -> None:
        """Write an `outputs` record."""
        self._write("outputs", outputs=outputs)

    def log_artifact(self, path: Path, name: str, kind: str) -> None:
        """Write an `artifact` record."""
        self._write("artifact", path=str(path), name=name, artifact_kind=kind)

    def close(self) -> None:
        """Close the file."""
        if not self._handle.closed:
            self._handle.close()


class PolyaxonSink:
    """Forwards to the Polyaxon run this process runs in (`polyaxon.tracking`).

    Polyaxon's writes are fire-and-forget here: a call that fails is retried while the failure is transient, logged
    only when its last try failed too (trainer.writes), and training goes on, since the agent's final events sync
    is the backstop (DESIGN.md). That sync only carries the last metric values, so `close` sends every output
    logged during the run once more, blocking.
    """

    FINAL_ATTEMPTS = 3

    def __init__(self, run: Any) -> None:
        self.run = run
        self._outputs: dict[str, Any] = {}
        self._artifacts: dict[str, tuple[Path, str]] = {}  # name -> (path, kind), for the check at close

    def log_params(self, params: dict[str, Any]) -> None:
        """Log params as run inputs, one nested value per group."""
        self._call("log_inputs", **params)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Log metrics as Polyaxon metric events at `step`, with the step itself as `global_step`.

        Polyaxon's summary sync copies each metric's last value into the run's outputs, which the bot's watcher
        reads from its list of changed runs: `global_step` there is the card's step without a request per run.
        """
        self._call("log_metrics", step=step, global_step=step, **metrics)

    def log_progress(self, done: float) -> None:
        """Polyaxon's run progress (its client throttles the writes)."""
        self._call("log_progress", value=min(1.0, max(0.0, done)))

    def log_results(self, results: dict[str, Any]) -> None:
        """Log the final results as run outputs."""
        self.log_outputs(results)

    def log_outputs(self, outputs: dict[str, Any]) -> None:
        """Merge `outputs` into the run's outputs (lists of strings or numbers survive as lists)."""
        self._outputs.update(outputs)
        self._call("log_outputs", **outputs)

    def log_artifact(self, path: Path, name: str, kind: str) -> None:
        """Log a lineage reference to an artifact already under the run's outputs."""
        self._artifacts[name] = (path, kind)
        if kind == "model":
            self._call("log_model_ref", path=str(path), name=name, framework="transformers")
        else:
            self._call("log_artifact_ref", path=str(path), kind=kind, name=name)

    def close(self) -> None:
        """Send the outputs once more (blocking), check the lineage landed, then flush the run's event writers."""
        if self._outputs:
            self._call("log_outputs", async_req=False, **self._outputs)
        for attempt in range(1, self.FINAL_ATTEMPTS + 1):
            if self._lineage_complete():
                break
            time.sleep(0.5 * attempt)
        self._call("end")

    def _lineage_complete(self) -> bool:
        """Read the run's lineage back and log, blocking, every artifact reference a dropped write lost.

        The client sends lineage in the background, and the sandbox drops a few overlapping writes: a model
        or eval_results reference missing from the lineage is a run that cannot be registered.
        """
        if not self._artifacts:
            return True
        try:
            landed = {a.name for a in (self.run.get_artifacts_lineage(limit=1000).results or [])}
            missing = [name for name in self._artifacts if name not in landed]
            if not missing:
                return True
            for name in missing:
                path, kind = self._artifacts[name]
                # Polyaxon's own summary (the content hash the registry binds a candidate to) and relative path.
                summary = self.run._calculate_summary_for_path_or_content(path=str(path))
                if kind == "model":
                    summary["framework"] = "transformers"
                body = {
                    "name": name,
                    "kind": kind,
                    "path": self.run._sanitize_filepath(filepath=str(path)),
                    "summary": summary,
                    "is_input": False,
                }
                self.run.log_artifact_lineage(body=body, async_req=False)
            logger.warning("polyaxon lineage: logged %s again (an earlier write was dropped)", ", ".join(missing))
            return False
        except Exception as exc:  # tracking must never fail the training run
            logger.warning("polyaxon lineage check failed: %s", exc)
            return False

    def _call(self, method: str, **kwargs: Any) -> bool:
        """One write, retried while its failures are transient (trainer.writes); whether it landed."""
        return write(lambda: getattr(self.run, method)(**kwargs), method, logger)


class MultiSink:
    """Sends every event to several sinks."""

    def __init__(self, sinks: list[TrackingSink]) -> None:
        self.sinks = sinks

    def log_params(self, params: dict[str, Any]) -> None:
        """Fan out `log_params`."""
        for sink in self.sinks:
            sink.log_params(params)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Fan out `log_metrics`."""
        for sink in self.sinks:
            sink.log_metrics(step, metrics)

    def log_progress(self, done: float) -> None:
        """Fan out `log_progress`."""
        for sink in self.sinks:
            sink.log_progress(done)

    def log_results(self, results: dict[str, Any]) -> None:
        """Fan out `log_results`."""
        for sink in self.sinks:
            sink.log_results(results)

    def log_outputs(self, outputs: dict[str, Any]) -> None:
        """Fan out `log_outputs`."""
        for sink in self.sinks:
            sink.log_outputs(outputs)

    def log_artifact(self, path: Path, name: str, kind: str) -> None:
        """Fan out `log_artifact`."""
        for sink in self.sinks:
            sink.log_artifact(path, name, kind)

    def close(self) -> None:
        """Close every sink."""
        for sink in self.sinks:
            sink.close()


def polyaxon_run_active() -> bool:
    """Whether this process runs inside a Polyaxon-managed run (the agent sets the run instance)."""
    return bool(os.environ.get("POLYAXON_RUN_INSTANCE"))


def polyaxon_outputs_path() -> Path:
    """The run's outputs path from Polyaxon's context variables (what `tracking.get_outputs_path()` returns)."""
    instance = os.environ["POLYAXON_RUN_INSTANCE"]  # owner.project.runs.uuid
    run_uuid = instance.split(".")[-1]
    context_root = os.environ.get("POLYAXON_CONTEXT_ROOT", "/plx-context")
    return Path(context_root) / "artifacts" / run_uuid / "outputs"


def init_polyaxon_run() -> Any:
    """Attach to the current Polyaxon run (`tracking.init()`), or None when that fails."""
    try:
        from polyaxon import tracking

        return tracking.init()
    except Exception as exc:  # a broken tracking setup must not stop the training
        logger.warning("polyaxon tracking.init() failed, tracking locally only: %s", exc)
        return None


def open_sinks(jsonl: Path, *, in_polyaxon: bool) -> MultiSink:
    """A JSONL file always, and the Polyaxon run this process runs in when there is one (tracked locally only when
    attaching to it fails)."""
    sinks: list[TrackingSink] = [JsonlSink(jsonl)]
    if in_polyaxon:
        polyaxon_run = init_polyaxon_run()
        if polyaxon_run is not None:
            sinks.append(PolyaxonSink(polyaxon_run))
    return MultiSink(sinks)
