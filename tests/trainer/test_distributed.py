"""The distributed component's path: `torchrun --nproc_per_node 2 -m trainer` on CPU (gloo) trains and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer.runs import start_trainer, tiny_args, train_losses
from trainer.checkpoints import missing_parts, read_meta
from trainer.digests import file_entries, folder_digest, manifest_digest

pytestmark = pytest.mark.trainer


def test_two_process_run_trains_and_checkpoints(tiny_model: Path, tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "torchrun.log"
    argv = tiny_args(tiny_model, out, max_steps=6, save_steps=3, per_device_train_batch_size=4)
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "trainer"]
    proc = start_trainer(argv, log, module=launcher)
    try:
        assert proc.wait(timeout=240) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    checkpoint = out / "checkpoint-6"
    assert missing_parts(checkpoint) == []
    assert sorted(p.name for p in checkpoint.glob("rng_state*.pth")) == ["rng_state_0.pth", "rng_state_1.pth"]
    # Rank 0 writes the manifest once every rank's files are there: it lists both RNG states.
    assert manifest_digest(checkpoint) == folder_digest(file_entries(checkpoint))
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {e["path"] for e in file_entries(checkpoint)}
    meta = read_meta(checkpoint)
    assert meta is not None and meta.world_size == 2
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    # Only rank 0 tracks: one params record, one loss per step.
    assert list(train_losses(out / "metrics.jsonl")) == [1, 2, 3, 4, 5, 6]
    assert (out / "model" / "model.safetensors").is_file()
