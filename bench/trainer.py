"""Throughput of `python -m trainer` vs a plain TRL `SFTTrainer` script vs a hand-written torch loop.

    .venv/bin/python bench/trainer.py [--steps 40] [--rounds 2] [--model DIR] [--json OUT.json]

All three train the same tiny model (built by `trainer.tiny_model` unless `--model` is given) on the
same tiny-chat data with the same config (batch, max length, lr, seed, fp32, no checkpoints) in one
process; the variants alternate for `--rounds` rounds and the best tokens/s of each is kept, which
damps the noise of a shared machine. Tokens are the non-padding input tokens (TRL's `num_tokens`).
Printed: tokens/s of each, `trainer / sft_trainer` (target >= 0.98) and `sft_trainer / torch_loop`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "manifests" / "datasets" / "tiny-chat"


def common(steps: int) -> dict[str, Any]:
    """The training config every variant uses."""
    return {
        "max_steps": steps,
        "learning_rate": 3e-3,
        "per_device_train_batch_size": 8,
        "max_length": 128,
        "logging_steps": 10,
        "seed": 7,
        "save_strategy": "no",
        "report_to": "none",
        "bf16": False,
        "assistant_only_loss": True,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def run_ours(model: Path, steps: int, out: Path) -> float:
    """`python -m trainer` (its `run` entry point, in this process); return tokens/s of training."""
    from trainer.__main__ import run

    flags = {**common(steps), "model_name_or_path": model, "dataset_name": DATA, "output_dir": out}
    argv: list[str] = []
    for key, value in flags.items():
        argv += [f"--{key}", str(value)]
    assert run(argv) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    metrics = [r["metrics"] for r in records if r["kind"] == "metrics"]
    tokens = max(m["num_tokens"] for m in metrics if "num_tokens" in m)
    runtime = next(m["train_runtime"] for m in metrics if "train_runtime" in m)
    return float(tokens / runtime)


def plain_sft_trainer(model: Path, steps: int, out: Path) -> Any:
    """A plain TRL script: load model, tokenizer and data, build an `SFTTrainer`."""
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=str(out), gradient_checkpointing=False, **common(steps))
    dataset = load_dataset("json", data_files={"train": str(DATA / "train.jsonl")}, split="train")
    return SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(model, dtype="float32"),
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model),
    )


def run_sft_trainer(model: Path, steps: int, out: Path) -> float:
    """Train with the plain script; return tokens/s."""
    trainer = plain_sft_trainer(model, steps, out)
    result = trainer.train()
    tokens = max(entry["num_tokens"] for entry in trainer.state.log_history if "num_tokens" in entry)
    return float(tokens / result.metrics["train_runtime"])


def run_torch_loop(model: Path, steps: int, out: Path) -> float:
    """A hand-written loop (fused AdamW, linear decay, grad clipping) on the SFTTrainer's exact batches."""
    import torch
    from transformers import AutoModelForCausalLM

    batches: list[Any] = []
    loader = plain_sft_trainer(model, steps, out).get_train_dataloader()
    while len(batches) < steps:
        for batch in loader:
            batches.append(batch)
            if len(batches) == steps:
                break
    torch.manual_seed(7)
    net = AutoModelForCausalLM.from_pretrained(model, dtype="float32")
    net.train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.0, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / steps))
    tokens = 0
    start = time.perf_counter()
    for batch in batches:
        output = net(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"), labels=batch["labels"])
        output.loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        mask = batch.get("attention_mask")
        tokens += int(mask.sum()) if mask is not None else batch["input_ids"].numel()
    elapsed = time.perf_counter() - start
    assert math.isfinite(float(output.loss))
    return tokens / elapsed


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: build the tiny model)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)

    import logging
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        root = Path(tmp)
        model = args.model
        if model is None:
            from trainer.tiny_model import build_tiny_model

            model = build_tiny_model(root / "tiny-llama")
        variants = {"trainer": run_ours, "sft_trainer": run_sft_trainer, "torch_loop": run_torch_loop}
        best: dict[str, float] = dict.fromkeys(variants, 0.0)
        for round_index in range(args.rounds):
            for name, variant in variants.items():
                rate = variant(model, args.steps, root / f"{name}-{round_index}")
                best[name] = max(best[name], rate)
                logging.getLogger("bench").warning("round %d %s: %.0f tokens/s", round_index, name, rate)
    figures = {
        "steps": args.steps,
        "rounds": args.rounds,
        "tokens_per_s": {name: round(rate, 1) for name, rate in best.items()},
        "trainer_over_sft_trainer": round(best["trainer"] / best["sft_trainer"], 3),
        "sft_trainer_over_torch_loop": round(best["sft_trainer"] / best["torch_loop"], 3),
        "trainer_over_torch_loop": round(best["trainer"] / best["torch_loop"], 3),
    }
    for name, rate in best.items():
        print(f"{name:>12}: {rate:9.0f} tokens/s")
    print(f"python -m trainer / SFTTrainer : {figures['trainer_over_sft_trainer']:.3f}  (target >= 0.98)")
    print(f"SFTTrainer / torch loop        : {figures['sft_trainer_over_torch_loop']:.3f}")
    print(f"python -m trainer / torch loop : {figures['trainer_over_torch_loop']:.3f}")
    print("GPU bench (MFU of the 135M model in bf16): not run, no GPU lent to this task")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
