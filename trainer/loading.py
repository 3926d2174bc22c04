"""Pinned loading for a run: the model (by id + revision or local path) with the head its trainer needs, the tokenizer,
the training split (digest checked, columns checked against the trainer) and the contract's eval rows."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from trainer.data import DatasetError, load_split, verify_digest
from trainer.evaluation import EvalContract, select_rows
from trainer.trainers import TrainerSpec, missing_columns

logger = logging.getLogger("trainer")


def offline_when_local(*names: str) -> bool:
    """Go offline (no Hub request at all) when every name is a local path — the model, the data and the eval data
    of a run that needs nothing from the Hub; True when it did.

    The variables are set for what is imported later; the libraries read them once at import, and a job forked from
    a preloaded interpreter (the local agent's) imported them already, so their flags are set too.
    """
    if not names or not all(name and Path(name).exists() for name in names):
        return False
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets.config
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    return True


class BaseModelError(ValueError):
    """The base run's model folder is missing, or is not the one its outputs recorded."""


def in_run_artifacts(path: Path, run: str, context_root: Path | None = None) -> Path:
    """Where `path`, written by run `run`, is in this job: as given when absolute or no run is named, else inside
    that run's artifacts, which Polyaxon's init step copies to `<context root>/artifacts/<run>/`."""
    if path.is_absolute() or not run:
        return path
    root = context_root or Path(os.environ.get("POLYAXON_CONTEXT_ROOT", "/plx-context"))
    return root / "artifacts" / run / path


def resolve_base_model(script_args: Any, model_args: Any, context_root: Path | None = None) -> None:
    """With `--base_run`, point `--model_name_or_path` at that run's model folder in this run's context (where the init
    step copied it) once its content matches `--base_model_digest` (never a silently different model)."""
    from trainer.digests import file_entries, folder_digest

    if not script_args.base_run:
        return
    folder = in_run_artifacts(Path(model_args.model_name_or_path), script_args.base_run, context_root)
    if not folder.is_dir():
        raise BaseModelError(f"the base run's model {folder} is not there (the init step copies it)")
    actual = folder_digest(file_entries(folder))
    expected = script_args.base_model_digest
    if expected and actual != expected:
        raise BaseModelError(f"the base run's model {folder} has digest {actual}; its outputs recorded {expected}")
    model_args.model_name_or_path = str(folder)
    logger.info("starting from base run %s's model %s (%s)", script_args.base_run, folder, actual)


def load_model_and_tokenizer(spec: TrainerSpec, model_args: Any, training_args: Any) -> tuple[Any, Any]:
    """Load the pinned model and tokenizer; a reward model is a 1-label sequence classifier that knows the pad token.

    TRL builds a reference model (DPO, KTO, GRPO, RLOO) from the policy's path and `model_init_kwargs`: for a hub
    model those get the pinned revision and dtype, so the reference is the same weights as the policy.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    name = model_args.model_name_or_path
    revision = model_args.model_revision
    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    kwargs: dict[str, Any] = {"revision": revision, "dtype": dtype}
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    if training_args.model_init_kwargs:
        kwargs.update(training_args.model_init_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(name, revision=revision)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if spec.model_head == "reward":
        # The score head is new (random, seeded by the caller); the classifier finds each sequence's last token by
        # the pad token id.
        model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=1, **kwargs)
        model.config.pad_token_id = tokenizer.pad_token_id
    else:
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    if spec.reference_model and not Path(name).exists():
        own = training_args.model_init_kwargs or {}
        training_args.model_init_kwargs = {"revision": revision, "dtype": model_args.dtype, **own}
    return model, tokenizer


def load_train_dataset(spec: TrainerSpec, script_args: Any) -> tuple[Any, str]:
    """Load the training split (checking a local dataset's digest) and check it has the trainer's columns."""
    if not script_args.dataset_name:
        raise ValueError("--dataset_name is required")
    digest = ""
    path = Path(script_args.dataset_name)
    if path.exists():
        digest = verify_digest(path, script_args.dataset_digest)
    elif script_args.dataset_digest:
        logger.warning("--dataset_digest is only verified for local data; %s is a hub id", script_args.dataset_name)
    dataset = load_split(script_args.dataset_name, script_args.dataset_revision, script_args.dataset_split)
    missing = missing_columns(spec, list(dataset.column_names))
    if missing:
        wanted = " or ".join("/".join(columns) for columns in spec.train_columns)
        raise DatasetError(
            f"--trainer {spec.name} trains on columns {wanted}; {script_args.dataset_name} "
            f"({script_args.dataset_split}) lacks {list(missing)} (it has {list(dataset.column_names)})"
        )
    return dataset, digest


def load_eval_dataset(contract: EvalContract | None) -> Any:
    """The contract's eval rows (seeded selection), or None without a contract."""
    if contract is None:
        return None
    return select_rows(load_split(contract.dataset, contract.revision, contract.split), contract)
