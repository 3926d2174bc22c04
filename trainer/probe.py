"""The preflight's rank probe: what each rank of a run saw of the launch and how much memory it used.

Enabled only when `FINETUNE_PREFLIGHT_DIR` is set (by `python -m trainer.preflight` for its child runs).
At train end every rank writes `$FINETUNE_PREFLIGHT_DIR/rank-<RANK>.json` (see `RankProbeCallback.report`;
`RANK` is the launcher's, the file's content the Trainer's view).
With `FINETUNE_PREFLIGHT_HOLD_AT=<step>` every rank, once the checkpoint of that step is saved and marked
complete (this callback runs after `CheckpointMetaCallback`), writes `held-rank-<RANK>` and sleeps until it
is killed: the preflight kills the workers right after a complete checkpoint, deterministically.
"""

from __future__ import annotations

import logging
import platform
import resource
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from trainer.digests import write_json_atomic

logger = logging.getLogger(__name__)

PREFLIGHT_DIR_ENV = "FINETUNE_PREFLIGHT_DIR"
HOLD_AT_ENV = "FINETUNE_PREFLIGHT_HOLD_AT"


def peak_rss_bytes() -> int:
    """This process's peak resident set size in bytes (`ru_maxrss` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _backend() -> str:
    import torch.distributed as dist

    return str(dist.get_backend()) if dist.is_available() and dist.is_initialized() else "none"


def _cuda_peak_bytes() -> int | None:
    import torch

    return int(torch.cuda.max_memory_allocated()) if torch.cuda.is_available() else None


class RankProbeCallback(TrainerCallback):
    """Writes each rank's probe file at train end, and holds every rank after the checkpoint of one step."""

    def __init__(self, folder: Path, hold_at: int | None = None, env: Mapping[str, str] | None = None) -> None:
        self.folder = folder
        self.hold_at = hold_at
        self.env = dict(env or {})

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RankProbeCallback | None:
        """The probe the environment asks for, or None when `FINETUNE_PREFLIGHT_DIR` is unset."""
        folder = env.get(PREFLIGHT_DIR_ENV, "")
        if not folder:
            return None
        hold = env.get(HOLD_AT_ENV, "")
        return cls(Path(folder), int(hold) if hold else None, env)

    def launch_rank(self, args: TrainingArguments) -> int:
        """The rank the launcher gave this process (`RANK`), which names its files even when the Trainer saw
        no process group (every process would be rank 0 then)."""
        return int(self.env.get("RANK", args.process_index))

    def report(self, args: TrainingArguments) -> dict[str, Any]:
        """This rank's view of the launch: ranks, sizes, batch, backend, device and peak memory."""
        world_size = int(args.world_size)
        per_device = int(args.per_device_train_batch_size)
        accumulation = int(args.gradient_accumulation_steps)
        return {
            "rank": int(args.process_index),
            "world_size": world_size,
            "local_rank": int(args.local_process_index),
            "local_world_size": int(self.env.get("LOCAL_WORLD_SIZE", "1")),
            "node_rank": int(self.env.get("GROUP_RANK", "0")),
            "hostname": socket.gethostname() or platform.node(),
            "per_device_train_batch_size": per_device,
            "gradient_accumulation_steps": accumulation,
            "global_batch": per_device * accumulation * world_size,
            "backend": _backend(),
            "device": str(args.device.type),
            "peak_rss_bytes": peak_rss_bytes(),
            "cuda_peak_bytes": _cuda_peak_bytes(),
        }

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Write `rank-<RANK>.json`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.folder / f"rank-{self.launch_rank(args)}.json", self.report(args))

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """At the hold step, say so (`held-rank-<RANK>`) and sleep until killed."""
        if self.hold_at is None or state.global_step != self.hold_at:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.folder / f"held-rank-{self.launch_rank(args)}", {"step": state.global_step})
        logger.warning("preflight: holding at step %s until killed", state.global_step)
        while True:
            time.sleep(60)
