"""Helpers for trainer tests: argument lists, in-process and subprocess runs, reading the JSONL tracking file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TINY_CHAT = REPO / "manifests" / "datasets" / "tiny-chat"
TINY_PREFS = REPO / "manifests" / "datasets" / "tiny-prefs"
TINY_KTO = REPO / "manifests" / "datasets" / "tiny-kto"
TINY_PROMPTS = REPO / "manifests" / "datasets" / "tiny-prompts"

# Per trainer beyond SFT: its tiny data (train and eval) and the flags of a short run (a few seconds on 2 cores).
ALIGN_DATA = {"dpo": TINY_PREFS, "kto": TINY_KTO, "reward": TINY_PREFS, "grpo": TINY_PROMPTS, "rloo": TINY_PROMPTS}
ALIGN_FLAGS: dict[str, dict[str, Any]] = {
    "dpo": {"beta": 0.1, "max_length": 64},
    "kto": {"beta": 0.1, "max_length": 64},
    "reward": {"max_length": 64},
    "grpo": {"reward_funcs": "format,length,exact-match", "num_generations": 2, "max_completion_length": 8},
    "rloo": {"reward_funcs": "format,length,exact-match", "num_generations": 2, "max_completion_length": 8},
}


def tiny_args(model: Path, out: Path, *, data: Path = TINY_CHAT, **overrides: Any) -> list[str]:
    """Command-line flags for a short, deterministic tiny-model run; keyword overrides win."""
    flags: dict[str, Any] = {
        "model_name_or_path": model,
        "dataset_name": data,
        "output_dir": out,
        "max_steps": 10,
        "learning_rate": 3e-3,
        "per_device_train_batch_size": 8,
        "max_length": 128,
        "logging_steps": 1,
        "save_steps": 5,
        "seed": 7,
        "assistant_only_loss": "true",
        "dataloader_num_workers": 0,
    }
    flags.update(overrides)
    argv: list[str] = []
    for key, value in flags.items():
        if value is None:
            continue
        argv += [f"--{key}", str(value)]
    return argv


def align_args(trainer: str, model: Path, out: Path, **overrides: Any) -> list[str]:
    """Command-line flags for a short run of `trainer` (dpo, kto, reward, grpo, rloo) on its tiny data, with its eval
    contract (the trainer's default metrics on 8 held-out rows); keyword overrides win (None drops a flag)."""
    data = ALIGN_DATA[trainer]
    flags: dict[str, Any] = {
        "trainer": trainer,
        "model_name_or_path": model,
        "dataset_name": data,
        "output_dir": out,
        "max_steps": 4,
        "learning_rate": 3e-3,
        "per_device_train_batch_size": 4,
        "logging_steps": 1,
        "save_steps": 2,
        "seed": 7,
        "dataloader_num_workers": 0,
        "eval_dataset_name": data,
        "eval_max_samples": 8,
        **ALIGN_FLAGS[trainer],
    }
    flags.update(overrides)
    return [arg for key, value in flags.items() if value is not None for arg in (f"--{key}", str(value))]


def train_in_process(argv: list[str]) -> int:
    """Parse `argv` like `python -m trainer` and run `trainer.run.main` in this process."""
    from trainer.__main__ import run

    return run(argv)


def trainer_env(**extra: str) -> dict[str, str]:
    """Environment for a trainer subprocess: offline, no Polyaxon run, repo on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYAXON_RUN")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", POLYAXON_NO_CONFIG="true", PYTHONPATH=str(REPO))
    env.update(extra)
    return env


def start_trainer(argv: list[str], log: Path, module: list[str] | None = None) -> subprocess.Popen[bytes]:
    """Start `python -m trainer ARGV` (or another module command) with its output in `log`."""
    command = [sys.executable, *(module or ["-m", "trainer"]), *argv]
    handle = log.open("wb")
    return subprocess.Popen(command, cwd=REPO, env=trainer_env(), stdout=handle, stderr=subprocess.STDOUT)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read the tracking file's records (a torn last line from a kill is ignored)."""
    records: list[dict[str, Any]] = []
    if not path.exists():
        return records
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def train_losses(path: Path) -> dict[int, float]:
    """Map global step -> training loss from a tracking file."""
    return {
        r["step"]: r["metrics"]["loss"] for r in read_jsonl(path) if r["kind"] == "metrics" and "loss" in r["metrics"]
    }


def wait_for(condition: Callable[[], bool], timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll `condition` until it holds; fail with the log tail if the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited early ({proc.returncode}):\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s:\n{log.read_text()[-3000:]}")
