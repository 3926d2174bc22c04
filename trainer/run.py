"""`main(script_args, training_args, model_args, eval_args)`: one run of a TRL trainer, as TRL's own scripts do it.

One flow for every trainer of `trainer.trainers` (SFT, DPO, GRPO, KTO, reward models, RLOO); what differs is
the trainer's spec. Added to TRL's scripts: pinned loading (model and data by id + revision or local path, data
digest checked; `trainer.loading`), project defaults for CPU machines, tracking (Polyaxon inside a run, a JSONL
file always), checkpoints under the run's outputs with a completeness marker and retention, resume from a
complete checkpoint in the run's own outputs (never a silent fresh start), an orderly stop on SIGTERM, the fixed
evaluation contract (`trainer.evaluation`, run by `trainer.procedures`; or a harness contract, `trainer.harness`:
lm-eval on the final model only, no in-training evaluation), content digests of every checkpoint and
of the final model (`trainer.digests`), and the preflight's rank probe when `python -m trainer.preflight` runs it
(`trainer.probe`).
"""

from __future__ import annotations

import json
import logging
import os
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
    EvalContractError,
    best_metric,
    check_contract_fits,
    contract_from_args,
    contract_hash,
    eval_results,
    report_metrics,
)
from trainer.harness import HarnessContract, prepare_harness
from trainer.provenance import git_revision, library_versions, local_recipe_hash, model_outputs
from trainer.termination import tell
from trainer.trainers import trainer_spec

logger = logging.getLogger("trainer")

EXIT_STOPPED = 143  # 128 + SIGTERM: the run was stopped, its last checkpoint and metrics are saved
EXIT_BAD_RESUME = 2  # --resume_from is not empty, `latest` or `checkpoint-<N>`: nothing was loaded
EXIT_NO_CHECKPOINT = 3  # nothing complete and compatible to resume from: refused rather than train from scratch
EXIT_BAD_BASE = 4  # --base_run's model is missing or not the one its outputs recorded: nothing was trained


def resolve_output_dir(requested: str, in_polyaxon: bool) -> Path:
    """`--output_dir` when given; else the Polyaxon run's outputs path inside a run, else `./outputs`."""
    if requested:
        return Path(requested)
    if in_polyaxon:
        from trainer.tracking import polyaxon_outputs_path

        return polyaxon_outputs_path()
    return Path(DEFAULT_LOCAL_OUTPUT_DIR)


def _setup_logging(is_main: bool) -> None:
    import transformers

    level = logging.INFO if is_main else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level, stream=sys.stdout)
    transformers.utils.logging.set_verbosity(logging.WARNING)


def _resume_refused(exc: CheckpointError) -> int:
    logger.error("cannot resume: %s", exc)
    tell(f"cannot resume: {exc}")
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


def check_harness_fits(harness: HarnessContract, trainer: str, model_head: str) -> None:
    """Refuse a harness contract where the harness cannot run: a reward model (no LM head), several processes."""
    if model_head != "causal-lm":
        raise EvalContractError(f"--trainer {trainer} trains a {model_head} model; lm-eval evaluates causal LMs only")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise EvalContractError(
            f"the {harness.procedure_version} harness runs in a single process; this run has WORLD_SIZE "
            f"{os.environ['WORLD_SIZE']} (use the single-process component)"
        )


def _pinned_contract_hash(contract: EvalContract | None, harness: HarnessContract | None) -> str:
    """The hash of the run's eval contract (a dataset contract or a harness contract), or "" without one."""
    if harness is not None:
        return harness.hash()
    return contract_hash(contract.fields()) if contract else ""


def main(script_args: Any, training_args: Any, model_args: Any, eval_args: Any) -> int:
    """Train, checkpoint, evaluate and track one run of the trainer `script_args.trainer`; return the exit code."""
    import transformers
    import trl
    from trl import get_peft_config

    from trainer.callbacks import CheckpointMetaCallback, StopOnSignalCallback, TrackingCallback
    from trainer.lean import lean_trainer_class
    from trainer.loading import (
        BaseModelError,
        load_eval_dataset,
        load_model_and_tokenizer,
        load_train_dataset,
        offline_when_local,
        resolve_base_model,
    )
    from trainer.probe import RankProbeCallback
    from trainer.procedures import ContractEvaluationMixin, build_evaluator
    from trainer.rewards import check_columns, parse_reward_names, select
    from trainer.tracking import MultiSink, open_sinks, polyaxon_run_active

    spec = trainer_spec(script_args.trainer)
    reward_names = parse_reward_names(script_args.reward_funcs) if spec.takes_reward_funcs else ()
    is_main = int(os.environ.get("RANK", "0")) == 0
    _setup_logging(is_main)
    in_polyaxon = polyaxon_run_active()
    output_dir = resolve_output_dir(training_args.output_dir, in_polyaxon)
    training_args.output_dir = str(output_dir)

    # A harness contract (trainer.harness) is checked first: its tasks' digests and versions before anything loads.
    harness = prepare_harness(eval_args)
    if harness is not None:
        check_harness_fits(harness[0], spec.name, spec.model_head)
    contract = contract_from_args(eval_args)
    if contract is not None:
        check_contract_fits(contract, spec.name, spec.procedure, reward_names)
    recipe_hash = script_args.recipe_hash or local_recipe_hash(spec, script_args, training_args, model_args)
    try:
        checkpoint = resolve_resume(script_args.resume_from, output_dir)
    except CheckpointError as exc:
        return _resume_refused(exc)

    # Seed before anything random is built (LoRA init, dropout, a reward model's new score head): TRL applies PEFT
    # before the Trainer seeds.
    transformers.set_seed(training_args.seed)
    # What the run starts from, as pinned: a base run's model is named by that run and digest, not by the path it
    # was copied to (which differs per run, and a resume must find the same model).
    model_pin = model_args.model_name_or_path
    if script_args.base_run:
        model_pin = f"run {script_args.base_run}: {model_pin}@{script_args.base_model_digest}"
    try:
        resolve_base_model(script_args, model_args)
    except BaseModelError as exc:
        logger.error("cannot start from the base run: %s", exc)
        tell(f"cannot start from the base run: {exc}")
        return EXIT_BAD_BASE
    evaluated = [eval_args.eval_dataset_name] if eval_args.eval_dataset_name else []
    if offline_when_local(model_args.model_name_or_path, script_args.dataset_name, *evaluated):
        logger.info("model and data are local: no Hub requests (HF_HUB_OFFLINE)")
    model, tokenizer = load_model_and_tokenizer(spec, model_args, training_args)
    train_dataset, train_digest = load_train_dataset(spec, script_args)
    eval_dataset = load_eval_dataset(contract)
    check_columns(reward_names, train_dataset.column_names, "train")
    if eval_dataset is not None:
        check_columns(reward_names, eval_dataset.column_names, "eval")
        if training_args.eval_steps and training_args.eval_strategy == "no":
            training_args.eval_strategy = "steps"
    if contract is not None:
        training_args.per_device_eval_batch_size = V1_EVAL_BATCH_SIZE
    if harness is not None and training_args.eval_strategy != "no":
        logger.info("eval_strategy %s -> no: the harness evaluates the final model only", training_args.eval_strategy)
        training_args.eval_strategy = "no"
    keep, keep_best = configure_retention(training_args, contract, script_args.keep_best_checkpoint)

    pins = {
        "model": model_pin,
        "model_revision": model_args.model_revision,
        "dataset": script_args.dataset_name,
        "dataset_revision": script_args.dataset_revision,
        "dataset_digest": train_digest or script_args.dataset_digest,
        "code_revision": script_args.code_revision or git_revision(),
        "image_digest": script_args.image_digest,
        "recipe_name": script_args.recipe_name,
        "recipe_hash": recipe_hash,
        "eval_contract_hash": _pinned_contract_hash(contract, harness[0] if harness else None),
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
        model_name_or_path=model_pin,
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

    # Built from the model as loaded, before TRL wraps it or training changes it: `pref-v1` scores its reference now.
    evaluator = None
    if contract is not None:
        evaluator = build_evaluator(
            contract.procedure_version, eval_dataset, tokenizer, model, training_args, reward_names
        )

    sink = MultiSink([])  # other ranks track nothing
    if is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        jsonl = Path(script_args.metrics_jsonl) if script_args.metrics_jsonl else output_dir / "metrics.jsonl"
        sink = open_sinks(jsonl, in_polyaxon=in_polyaxon)
    stopper = StopOnSignalCallback()
    stopper.install()
    checkpoints = CheckpointMetaCallback(expected_meta, sink, keep=keep, keep_best=keep_best, resumed_from=checkpoint)
    # The preflight's probe runs after the checkpoint callback: it may hold a rank once a checkpoint is marked.
    probe = RankProbeCallback.from_env(os.environ)

    trainer_class = lean_trainer_class(getattr(trl, spec.trainer_class), ContractEvaluationMixin)
    extra: dict[str, Any] = {"reward_funcs": select(reward_names)} if spec.takes_reward_funcs else {}
    trainer = trainer_class(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=[TrackingCallback(sink, params), checkpoints, *([probe] if probe else []), stopper],
        **extra,
    )
    trainer.contract_evaluator = evaluator
    try:
        train_result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        checkpoints.report(output_dir, trainer.state)
        if stopper.requested:
            logger.warning("stopped at step %s; checkpoint saved", trainer.state.global_step)
            sink.log_results({"stopped_at_step": trainer.state.global_step})
            tell(f"stopped by a signal at step {trainer.state.global_step}; its checkpoint is saved")
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
            if harness is not None:
                from trainer.harness_run import evaluate_and_record

                document = evaluate_and_record(
                    *harness,
                    model_dir,
                    model_args.dtype,
                    output_dir,
                    sink,
                    trainer.state.global_step,
                    pins,
                    base_model=model_args.model_name_or_path,
                    base_revision=model_args.model_revision,
                )
                results.update(document["metrics"], eval_contract_hash=document["contract_hash"])
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
