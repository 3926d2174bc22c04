"""Trainer callbacks for the side effects of a run: tracking, checkpoint markers and retention, orderly stop.

Only `trainer.sft.main` imports this module (it imports transformers at the top, to subclass
`TrainerCallback`); Polyaxon is imported only when the run is inside Polyaxon.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from trainer.checkpoints import CheckpointMeta, checkpoint_step, complete_checkpoints, retention_plan, write_meta

logger = logging.getLogger(__name__)


class TrackingSink(Protocol):
    """Where params, metrics, results and artifacts of a run go."""

    def log_params(self, params: dict[str, Any]) -> None:
        """Record the run's resolved configuration, pins and versions (once)."""

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Record metrics at a global step."""

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

    Polyaxon's writes are fire-and-forget here: a failed API call is logged and training goes on, since
    the agent's final events sync is the backstop (DESIGN.md). That sync only carries the last metric
    values, so `close` sends every output logged during the run once more, blocking, with a few retries.
    """

    FINAL_ATTEMPTS = 3

    def __init__(self, run: Any) -> None:
        self.run = run
        self._outputs: dict[str, Any] = {}

    def log_params(self, params: dict[str, Any]) -> None:
        """Log params as run inputs, one nested value per group."""
        self._call("log_inputs", **params)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Log metrics as Polyaxon metric events at `step`."""
        self._call("log_metrics", step=step, **metrics)

    def log_results(self, results: dict[str, Any]) -> None:
        """Log the final results as run outputs."""
        self.log_outputs(results)

    def log_outputs(self, outputs: dict[str, Any]) -> None:
        """Merge `outputs` into the run's outputs (lists of strings or numbers survive as lists)."""
        self._outputs.update(outputs)
        self._call("log_outputs", **outputs)

    def log_artifact(self, path: Path, name: str, kind: str) -> None:
        """Log a lineage reference to an artifact already under the run's outputs."""
        if kind == "model":
            self._call("log_model_ref", path=str(path), name=name, framework="transformers")
        else:
            self._call("log_artifact_ref", path=str(path), kind=kind, name=name)

    def close(self) -> None:
        """Send the outputs once more (blocking), then flush the run's event writers."""
        if self._outputs:
            for attempt in range(1, self.FINAL_ATTEMPTS + 1):
                if self._call("log_outputs", async_req=False, **self._outputs):
                    break
                time.sleep(0.5 * attempt)
        self._call("end")

    def _call(self, method: str, **kwargs: Any) -> bool:
        try:
            getattr(self.run, method)(**kwargs)
            return True
        except Exception as exc:  # tracking must never fail the training run
            logger.warning("polyaxon %s failed: %s", method, exc)
            return False


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


def numeric_metrics(logs: dict[str, Any]) -> dict[str, float]:
    """Keep the finite numeric values of a Trainer log record."""
    metrics = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            metrics[key] = float(value)
    return metrics


class TrackingCallback(TrainerCallback):
    """Forwards params (once, at train start) and every logged metric with its global step to a sink."""

    def __init__(self, sink: TrackingSink, params: dict[str, Any]) -> None:
        self.sink = sink
        self.params = params
        self._params_logged = False

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Log the run's params once."""
        if state.is_world_process_zero and not self._params_logged:
            self.sink.log_params(self.params)
            self._params_logged = True

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Log train metrics, eval metrics and the final train summary at the current global step."""
        if state.is_world_process_zero and logs:
            metrics = numeric_metrics(logs)
            if metrics:
                self.sink.log_metrics(state.global_step, metrics)


class CheckpointMetaCallback(TrainerCallback):
    """Marks each checkpoint complete once the Trainer has saved it, applies retention, and reports both.

    Outputs (to the sink, main process only): at train begin `max_steps`, and when resuming
    `resumed_from_checkpoint` / `resumed_from_step` (the state is loaded by then); after each marker
    `checkpoint_latest`, `checkpoint_latest_step`, `checkpoints` (the complete ones kept, oldest first)
    and `checkpoint_best` / `checkpoint_best_step` when the eval metric has named one.
    """

    def __init__(
        self,
        meta: CheckpointMeta,
        sink: TrackingSink | None = None,
        *,
        keep: int = 0,
        keep_best: bool = False,
        resumed_from: Path | None = None,
    ) -> None:
        self.meta = meta
        self.sink = sink
        self.keep = keep
        self.keep_best = keep_best
        self.resumed_from = resumed_from

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Report the schedule's total and, when resuming, the checkpoint just loaded."""
        if not state.is_world_process_zero or self.sink is None:
            return
        outputs: dict[str, Any] = {"max_steps": state.max_steps}
        if self.resumed_from is not None:
            outputs.update(resumed_from_checkpoint=self.resumed_from.name, resumed_from_step=state.global_step)
        self.sink.log_outputs(outputs)

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Mark the checkpoint just written as complete, drop the ones retention lets go, report what is kept."""
        if args.world_size > 1:
            import torch.distributed as dist

            # Every rank writes its own RNG state: the marker says "complete" only once all have.
            dist.barrier()
        if not state.is_world_process_zero:
            return
        output_dir = Path(str(args.output_dir))
        checkpoint = output_dir / f"checkpoint-{state.global_step}"
        if not checkpoint.is_dir():
            return
        write_meta(checkpoint, CheckpointMeta(**{**self.meta.to_json(), "global_step": state.global_step}))
        for doomed in retention_plan(output_dir, self.keep, self.best_step(output_dir, state), state.global_step):
            logger.info("retention: deleting %s", doomed.name)
            shutil.rmtree(doomed, ignore_errors=True)
        self.report(output_dir, state)

    def best_step(self, output_dir: Path, state: TrainerState) -> int | None:
        """The step of the best checkpoint by the eval metric, when it is kept in `output_dir`."""
        step = state.best_global_step if self.keep_best else None
        return step if step and (output_dir / f"checkpoint-{step}").is_dir() else None

    def report(self, output_dir: Path, state: TrainerState) -> None:
        """Log the complete checkpoints kept in `output_dir` (also called once training has ended)."""
        if self.sink is None or not state.is_world_process_zero:
            return
        kept = complete_checkpoints(output_dir)
        if not kept:
            return
        outputs: dict[str, Any] = {
            "checkpoint_latest": kept[-1].name,
            "checkpoint_latest_step": checkpoint_step(kept[-1]),
            "checkpoints": [p.name for p in kept],
        }
        best = self.best_step(output_dir, state)
        if best is not None and any(checkpoint_step(p) == best for p in kept):
            outputs.update(checkpoint_best=f"checkpoint-{best}", checkpoint_best_step=best)
        self.sink.log_outputs(outputs)


class StopOnSignalCallback(TrainerCallback):
    """Turns SIGTERM (and SIGINT) into an orderly stop: finish the step, save a checkpoint, end training.

    Under torch.distributed every rank must stop at the same step, so the flag is all-reduced each step.
    """

    def __init__(self) -> None:
        self.requested = False
        self.stopped_at: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Install the signal handlers (main thread only)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Restore the handlers that were there before `install`."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        logger.warning("received signal %s: stopping after this step and saving a checkpoint", signum)
        self.requested = True
        # A second signal kills at once.
        signal.signal(signum, signal.SIG_DFL)

    def _any_rank_requested(self, args: TrainingArguments) -> bool:
        if args.world_size <= 1:
            return self.requested
        import torch
        import torch.distributed as dist

        flag = torch.tensor([1 if self.requested else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Ask the Trainer to save and stop once a signal arrived."""
        if self._any_rank_requested(args):
            self.requested = True
            self.stopped_at = state.global_step
            control.should_save = True
            control.should_training_stop = True


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
