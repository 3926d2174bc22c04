"""`main(script_args, training_args, model_args, eval_args)`: SFT with TRL, as `trl/scripts/sft.py` does it.

Added to TRL's script: pinned loading (model and data by id + revision or local path, data digest
checked), project defaults for CPU machines, tracking (Polyaxon inside a run, a JSONL file always),
checkpoints under the run's outputs with a completeness marker and retention, resume from a complete
checkpoint in the run's own outputs (never a silent fresh start), an orderly stop on SIGTERM, the
fixed evaluation contract, content digests of every checkpoint and of the final model (`trainer.digests`),
and the preflight's rank probe when `python -m trainer.preflight` runs it (`trainer.probe`).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trainer.checkpoints import (
    CheckpointError,
    CheckpointMeta,
    ResumeValueError,
    abandon_newer,
    check_compatible,
    checkpoint_step,
    resolve_resume,
    tokenizer_fingerprint,
)
from trainer.config import DEFAULT_LOCAL_OUTPUT_DIR
from trainer.digests import file_sha256
from trainer.evaluation import (
    V1_EVAL_BATCH_SIZE,
    EvalContract,
    best_metric,
    contract_from_args,
    contract_hash,
    eval_results,
    report_metrics,
    select_rows,
)

logger = logging.getLogger("trainer")

EXIT_STOPPED = 143  # 128 + SIGTERM: the run was stopped, its last checkpoint and metrics are saved
EXIT_BAD_RESUME = 2  # --resume_from is not empty, `latest` or `checkpoint-<N>`: nothing was loaded
EXIT_NO_CHECKPOINT = 3  # nothing complete and compatible to resume from: refused rather than train from scratch
_VERSIONED = ("torch", "transformers", "trl", "peft", "datasets", "accelerate", "tokenizers")


def library_versions() -> dict[str, str]:
    """Return the versions of Python and the training libraries."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "absent"
    return versions


def git_revision() -> str:
    """Return `git rev-parse HEAD` of the working directory, or an empty string outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def resolve_output_dir(requested: str, in_polyaxon: bool) -> Path:
    """`--output_dir` when given; else the Polyaxon run's outputs path inside a run, else `./outputs`."""
    if requested:
        return Path(requested)
    if in_polyaxon:
        from trainer.tracking import polyaxon_outputs_path

        return polyaxon_outputs_path()
    return Path(DEFAULT_LOCAL_OUTPUT_DIR)


def local_recipe_hash(script_args: Any, training_args: Any, model_args: Any) -> str:
    """Hash the training-relevant choices when the bot passed no `--recipe_hash` (so resume still checks).

    The schedule's length (`max_steps`, `num_train_epochs`) is left out: resuming with a longer one is allowed.
    """
    from trainer.evaluation import contract_hash as _sha

    keys = (
        "learning_rate",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "max_length",
        "seed",
        "lr_scheduler_type",
        "warmup_ratio",
        "bf16",
        "weight_decay",
        "assistant_only_loss",
        "packing",
        "dataset_text_field",
    )
    fields: dict[str, Any] = {key: str(getattr(training_args, key, None)) for key in keys}
    fields.update(
        model=f"{model_args.model_name_or_path}@{model_args.model_revision}",
        peft=str((model_args.use_peft, model_args.lora_r, model_args.lora_alpha, model_args.lora_target_modules)),
        dataset=f"{script_args.dataset_name}@{script_args.dataset_revision}:{script_args.dataset_split}",
        metrics=[],
    )
    return "local-" + _sha(fields).removeprefix("sha256:")[:16]


def model_outputs(model_dir: Path) -> dict[str, Any]:
    """Write the final model folder's manifest; return its outputs `model_digest`, `model_size_bytes`, `model_files`."""
    from trainer.digests import read_manifest, write_manifest

    digest = write_manifest(model_dir)
    files = (read_manifest(model_dir) or {}).get("files", [])
    return {"model_digest": digest, "model_size_bytes": sum(f["size"] for f in files), "model_files": len(files)}


def _load_model_and_tokenizer(model_args: Any, training_args: Any) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = model_args.model_name_or_path
    revision = model_args.model_revision
    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    kwargs: dict[str, Any] = {"revision": revision, "dtype": dtype}
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    if training_args.model_init_kwargs:
        kwargs.update(training_args.model_init_kwargs)
    model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(name, revision=revision)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _load_train_dataset(script_args: Any) -> tuple[Any, str]:
    from trainer.data import load_split, verify_digest

    if not script_args.dataset_name:
        raise ValueError("--dataset_name is required")
    digest = ""
    path = Path(script_args.dataset_name)
    if path.exists():
        digest = verify_digest(path, script_args.dataset_digest)
    elif script_args.dataset_digest:
        logger.warning("--dataset_digest is only verified for local data; %s is a hub id", script_args.dataset_name)
    return load_split(script_args.dataset_name, script_args.dataset_revision, script_args.dataset_split), digest


def _load_eval_dataset(contract: EvalContract | None) -> Any:
    from trainer.data import load_split

    if contract is None:
        return None
    return select_rows(load_split(contract.dataset, contract.revision, contract.split), contract)


def _setup_logging(is_main: bool) -> None:
    import transformers

    level = logging.INFO if is_main else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level, stream=sys.stdout)
    transformers.utils.logging.set_verbosity(logging.WARNING)


def _resume_refused(exc: CheckpointError) -> int:
    logger.error("cannot resume: %s", exc)
    return EXIT_BAD_RESUME if isinstance(exc, ResumeValueError) else EXIT_NO_CHECKPOINT


def configure_retention(training_args: Any, contract: EvalContract | None, keep_best: bool) -> tuple[int, bool]:
    """Take checkpoint rotation over from the Trainer; return (newest complete ones to keep, whether best counts).

    The Trainer's own rotation runs before the completeness marker is written, counts the best within the
    limit and, at a limit of 1, deletes the newest checkpoint at the end; the trainer rotates in
    `CheckpointMetaCallback` instead. The Trainer still tracks the best (`metric_for_best_model`,
    `greater_is_better`; never `load_best_model_at_end`: the final model is the last one), which needs an
    evaluation at every save step.
    """
    keep = int(training_args.save_total_limit or 0)
    training_args.save_total_limit = None
    if not keep_best or contract is None or training_args.eval_strategy == "no":
        return keep, False
    training_args.metric_for_best_model, training_args.greater_is_better = best_metric(contract)
    save, every = float(training_args.save_steps), float(training_args.eval_steps or 0)
    by_steps = training_args.eval_strategy == "steps" and training_args.save_strategy == "steps"
    if by_steps and save >= 1 and every >= 1 and save % every:
        logger.info("eval_steps %g -> %g: the best checkpoint is known only where evaluation meets a save", every, save)
        training_args.eval_steps = training_args.save_steps
    return keep, True


def main(script_args: Any, training_args: Any, model_args: Any, eval_args: Any) -> int:
    """Train, checkpoint, evaluate and track one SFT run; return the process exit code."""
    import transformers
    from trl import get_peft_config

    from trainer.callbacks import CheckpointMetaCallback, StopOnSignalCallback, TrackingCallback
    from trainer.lean import LeanSFTTrainer
    from trainer.probe import RankProbeCallback
    from trainer.tracking import (
        JsonlSink,
        MultiSink,
        PolyaxonSink,
        TrackingSink,
        init_polyaxon_run,
        polyaxon_run_active,
    )

    is_main = int(os.environ.get("RANK", "0")) == 0
    _setup_logging(is_main)
    in_polyaxon = polyaxon_run_active()
    output_dir = resolve_output_dir(training_args.output_dir, in_polyaxon)
    training_args.output_dir = str(output_dir)

    contract = contract_from_args(eval_args)
    recipe_hash = script_args.recipe_hash or local_recipe_hash(script_args, training_args, model_args)
    try:
        checkpoint = resolve_resume(script_args.resume_from, output_dir)
    except CheckpointError as exc:
        return _resume_refused(exc)

    # Seed before anything random is built (LoRA init, dropout): TRL applies PEFT before the Trainer seeds.
    transformers.set_seed(training_args.seed)
    model, tokenizer = _load_model_and_tokenizer(model_args, training_args)
    train_dataset, train_digest = _load_train_dataset(script_args)
    eval_dataset = _load_eval_dataset(contract)
    if eval_dataset is not None and training_args.eval_steps and training_args.eval_strategy == "no":
        training_args.eval_strategy = "steps"
    if contract is not None:
        training_args.per_device_eval_batch_size = V1_EVAL_BATCH_SIZE
    keep, keep_best = configure_retention(training_args, contract, script_args.keep_best_checkpoint)

    pins = {
        "model": model_args.model_name_or_path,
        "model_revision": model_args.model_revision,
        "dataset": script_args.dataset_name,
        "dataset_revision": script_args.dataset_revision,
        "dataset_digest": train_digest or script_args.dataset_digest,
        "code_revision": script_args.code_revision or git_revision(),
        "image_digest": script_args.image_digest,
        "recipe_name": script_args.recipe_name,
        "recipe_hash": recipe_hash,
        "eval_contract_hash": contract_hash(contract.fields()) if contract else "",
    }
    params = {
        "config": {
            "script": asdict(script_args),
            "model": asdict(model_args),
            "eval": asdict(eval_args),
            "training": training_args.to_sanitized_dict(),
            "retention": {"save_total_limit": keep, "keep_best_checkpoint": keep_best},
        },
        "pins": pins,
        "versions": library_versions(),
    }

    world_size = training_args.world_size
    expected_meta = CheckpointMeta(
        global_step=0,
        model_name_or_path=model_args.model_name_or_path,
        model_revision=model_args.model_revision,
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        recipe_hash=recipe_hash,
        world_size=world_size,
    )
    if checkpoint is not None:
        try:
            check_compatible(checkpoint, expected_meta)
        except CheckpointError as exc:
            return _resume_refused(exc)
        logger.info("resuming from %s", checkpoint)
        if is_main:
            for folder in abandon_newer(output_dir, checkpoint_step(checkpoint) or 0):
                logger.warning("%s is newer than the checkpoint resumed from: no longer marked complete", folder.name)

    sinks: list[TrackingSink] = []
    polyaxon_run = None
    if is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        jsonl = Path(script_args.metrics_jsonl) if script_args.metrics_jsonl else output_dir / "metrics.jsonl"
        sinks.append(JsonlSink(jsonl))
        if in_polyaxon:
            polyaxon_run = init_polyaxon_run()
            if polyaxon_run is not None:
                sinks.append(PolyaxonSink(polyaxon_run))
    sink = MultiSink(sinks)
    stopper = StopOnSignalCallback()
    stopper.install()
    checkpoints = CheckpointMetaCallback(expected_meta, sink, keep=keep, keep_best=keep_best, resumed_from=checkpoint)
    # The preflight's probe runs after the checkpoint callback: it may hold a rank once a checkpoint is marked.
    probe = RankProbeCallback.from_env(os.environ)

    trainer = LeanSFTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=[TrackingCallback(sink, params), checkpoints, *([probe] if probe else []), stopper],
    )
    try:
        train_result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        checkpoints.report(output_dir, trainer.state)
        if stopper.requested:
            logger.warning("stopped at step %s; checkpoint saved", trainer.state.global_step)
            sink.log_results({"stopped_at_step": trainer.state.global_step})
            return EXIT_STOPPED
        results: dict[str, Any] = {"global_step": trainer.state.global_step, "train_loss": train_result.training_loss}
        model_dir = output_dir / "model"
        trainer.save_model(str(model_dir))
        if contract is not None:
            raw = trainer.evaluate()
            metrics = report_metrics(raw, contract)
            document = eval_results(contract, metrics, trainer.state.global_step, pins)
            results.update(metrics, eval_contract_hash=document["contract_hash"])
            if is_main:
                eval_path = output_dir / "eval_results.json"
                eval_path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
                sink.log_outputs({"eval_results_digest": "sha256:" + file_sha256(eval_path)})
                sink.log_artifact(eval_path, "eval_results", "file")
        if is_main:
            tokenizer.save_pretrained(str(model_dir))
            sink.log_outputs(model_outputs(model_dir))
            sink.log_artifact(model_dir, "model", "model")
            sink.log_results(results)
        return 0
    finally:
        sink.close()
        stopper.uninstall()
        _end(trainer)


def _end(trainer: Any) -> None:
    """Drop the DDP wrapper while the process group lives, then destroy the group (`Trainer.end`).

    Destroying the gloo group first and the DDP reducer later (at interpreter exit) deadlocks: the
    group's worker thread waits for the GIL the destructor holds.
    """
    import gc

    trainer.accelerator.free_memory()
    trainer.model_wrapped = trainer.model
    gc.collect()
    trainer.end()
