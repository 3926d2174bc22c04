"""Trainer callbacks for the side effects of a run: tracking, checkpoint markers and retention, orderly stop.

Only `trainer.run.main` imports this module (it imports transformers at the top, to subclass
`TrainerCallback`); where tracking goes is `trainer.tracking`.
"""

from __future__ import annotations

import logging
import math
import shutil
import signal
from pathlib import Path
from types import FrameType
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from trainer.checkpoints import CheckpointMeta, checkpoint_step, complete_checkpoints, retention_plan, write_meta
from trainer.digests import manifest_digest, write_manifest
from trainer.tracking import TrackingSink

logger = logging.getLogger(__name__)


def numeric_metrics(logs: dict[str, Any]) -> dict[str, float]:
    """Keep the finite numeric values of a Trainer log record."""
    metrics = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            metrics[key] = float(value)
    return metrics


NONFINITE = "nonfinite_values"  # read by the bot's health rules (bot.health.rules)
NONFINITE_KEYS = "nonfinite_keys"


def nonfinite_keys(logs: dict[str, Any]) -> list[str]:
    """The metrics of a Trainer log record that are NaN or infinite (a loss that diverged), sorted."""
    return sorted(
        key
        for key, value in logs.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and not math.isfinite(value)
    )


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
            broken = nonfinite_keys(logs)
            if broken:
                # Polyaxon keeps no NaN: the count and the names go instead, for the bot's `nan` alert.
                metrics[NONFINITE] = float(len(broken))
                self.sink.log_outputs({NONFINITE_KEYS: ", ".join(broken), "nonfinite_step": state.global_step})
            if metrics:
                self.sink.log_metrics(state.global_step, metrics)
            if state.max_steps and state.max_steps > 0:
                self.sink.log_progress(state.global_step / state.max_steps)


class CheckpointMetaCallback(TrainerCallback):
    """Marks each checkpoint complete once the Trainer has saved it, applies retention, and reports both.

    Outputs (to the sink, main process only): at train begin `max_steps`, and when resuming
    `resumed_from_checkpoint` / `resumed_from_step` (the state is loaded by then); after each marker
    `checkpoint_latest`, `checkpoint_latest_step`, `checkpoints` (the complete ones kept, oldest first),
    `checkpoint_digests` (name -> the digest of its `finetune_files.json` manifest, see `trainer.digests`)
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
        """Write the checkpoint's manifest, then mark it complete, drop what retention lets go, report what is kept.

        The manifest comes before the marker, so a complete checkpoint always carries its manifest.
        """
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
        write_manifest(checkpoint)
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
        digests = {p.name: manifest_digest(p) for p in kept}
        outputs["checkpoint_digests"] = {name: digest for name, digest in digests.items() if digest}
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
