"""`python -m trainer.eval_run --model_name_or_path FOLDER --eval_tasks ... [--key value ...]`: a run of kind eval.

Evaluates an existing model folder with a harness contract (`trainer.harness`, procedure `lm-eval-v1`) and nothing
else: no training. On Polyaxon the folder is a finished run's `outputs/model`, copied into this run's context by an
init step exactly as for a chained run: `--base_run UUID --base_model_digest sha256:...` find it there
(`trainer.loading.resolve_base_model`) and check its digest before anything loads. Without `--base_run` the path is
used as given, its digest checked when `--base_model_digest` is set.

Writes into the output folder (`--output_dir`, else the Polyaxon run's outputs, else `./outputs`) what a training
run with a harness contract writes: `eval_results.json` (global step 0; pins name the model, its digest and
`--subject`), `eval_samples.jsonl` and `metrics.jsonl`, and records the same metrics and outputs in the same
tracking sinks. Exit codes are the trainer's: 0 done, `EXIT_BAD_BASE` (4) when the model folder is missing or not
the pinned one; a contract the tasks or the environment do not match raises `EvalContractError` (exit 1), as the
trainer does.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer.config import EvalArguments
from trainer.evaluation import EvalContractError
from trainer.harness import HARNESS, HARNESS_PROCEDURE

logger = logging.getLogger("trainer")


@dataclass
class EvalRunArguments:
    """What `python -m trainer.eval_run` evaluates and records, besides the harness contract (`EvalArguments`)."""

    model_name_or_path: str = field(
        default="",
        metadata={
            "help": "The model folder. With --base_run: the folder inside that run's artifacts (e.g. outputs/model), "
            "which Polyaxon's init step copied to <context root>/artifacts/<run>/."
        },
    )
    base_run: str = field(default="", metadata={"help": "The uuid of the run whose model is evaluated."})
    base_model_digest: str = field(
        default="",
        metadata={"help": "The model folder's digest (as that run's outputs recorded it); verified before loading."},
    )
    dtype: str = field(default="float32", metadata={"help": "float32 | bfloat16 | float16 | auto."})
    output_dir: str = field(
        default="", metadata={"help": "Where results go (default: the Polyaxon run's outputs, else ./outputs)."}
    )
    subject: str = field(
        default="", metadata={"help": "What is evaluated, as the bot names it (e.g. `run NAME`, `model NAME:1`)."}
    )
    recipe_name: str = field(default="", metadata={"help": "Name of the catalog recipe this run comes from."})
    recipe_hash: str = field(default="", metadata={"help": "Hash of the resolved recipe."})
    code_revision: str = field(
        default="", metadata={"help": "Git revision of the evaluation code (defaults to `git rev-parse HEAD`)."}
    )
    image_digest: str = field(default="", metadata={"help": "Digest of the container image the run uses."})
    metrics_jsonl: str = field(
        default="", metadata={"help": "Local JSONL tracking file (default: OUTPUT_DIR/metrics.jsonl)."}
    )


def build_parser() -> Any:
    """Return an `HfArgumentParser` over (EvalRunArguments, EvalArguments) with the harness defaults."""
    from transformers import HfArgumentParser

    dataclass_types: Any = (EvalRunArguments, EvalArguments)
    parser = HfArgumentParser(dataclass_types, prog="python -m trainer.eval_run")
    parser.set_defaults(eval_harness=HARNESS, eval_procedure_version=HARNESS_PROCEDURE, eval_metrics="")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[EvalRunArguments, EvalArguments]:
    """Parse the command line into (run args, eval args); an unknown flag is an error."""
    args = list(argv) if argv is not None else sys.argv[1:]
    run_args, eval_args = build_parser().parse_args_into_dataclasses(args=args)
    return run_args, eval_args


def resolve_model(run_args: EvalRunArguments) -> tuple[Path, str]:
    """The model folder in this job (inside `--base_run`'s artifacts, else the path as given) and its digest, which
    must be `--base_model_digest` when that is set (never a silently different model)."""
    from trainer.digests import file_entries, folder_digest
    from trainer.loading import BaseModelError, in_run_artifacts

    if not run_args.model_name_or_path:
        raise BaseModelError("--model_name_or_path names no model folder")
    folder = in_run_artifacts(Path(run_args.model_name_or_path), run_args.base_run)
    if not folder.is_dir():
        where = f"the base run's model {folder} is not there (the init step copies it)" if run_args.base_run else ""
        raise BaseModelError(where or f"the model {folder} is not a folder")
    actual = folder_digest(file_entries(folder))
    expected = run_args.base_model_digest
    if expected and actual.removeprefix("sha256:") != expected.removeprefix("sha256:"):
        raise BaseModelError(f"the model {folder} has digest {actual}; its outputs recorded {expected}")
    return folder, actual


def main(run_args: EvalRunArguments, eval_args: EvalArguments) -> int:
    """Check the contract and the model, evaluate, record; return the exit code."""
    from importlib.metadata import version

    from trainer.harness import prepare_harness
    from trainer.harness_run import evaluate_and_record
    from trainer.loading import BaseModelError, offline_when_local
    from trainer.provenance import git_revision, library_versions
    from trainer.run import EXIT_BAD_BASE, resolve_output_dir
    from trainer.tracking import open_sinks, polyaxon_run_active

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO, stream=sys.stdout)
    harness = prepare_harness(eval_args)
    if harness is None:
        raise EvalContractError(f"python -m trainer.eval_run evaluates a harness contract: --eval_harness {HARNESS}")
    contract, folders = harness
    try:
        model_dir, digest = resolve_model(run_args)
    except BaseModelError as exc:
        logger.error("cannot evaluate the model: %s", exc)
        return EXIT_BAD_BASE
    if offline_when_local(str(model_dir)):
        logger.info("the model is local: no Hub requests (HF_HUB_OFFLINE)")
    in_polyaxon = polyaxon_run_active()
    output_dir = resolve_output_dir(run_args.output_dir, in_polyaxon)
    output_dir.mkdir(parents=True, exist_ok=True)

    model_pin = str(model_dir)
    if run_args.base_run:
        model_pin = f"run {run_args.base_run}: {run_args.model_name_or_path}@{digest}"
    pins = {
        "model": model_pin,
        "model_digest": digest,
        "subject": run_args.subject,
        "code_revision": run_args.code_revision or git_revision(),
        "image_digest": run_args.image_digest,
        "recipe_name": run_args.recipe_name,
        "recipe_hash": run_args.recipe_hash,
        "eval_contract_hash": contract.hash(),
    }
    jsonl = Path(run_args.metrics_jsonl) if run_args.metrics_jsonl else output_dir / "metrics.jsonl"
    sink = open_sinks(jsonl, in_polyaxon=in_polyaxon)
    try:
        config = {"run": asdict(run_args), "eval": asdict(eval_args)}
        versions = {**library_versions(), HARNESS: version("lm_eval")}
        sink.log_params({"config": config, "pins": pins, "versions": versions})
        document = evaluate_and_record(
            contract, folders, model_dir, run_args.dtype, output_dir, sink, 0, pins, subject=run_args.subject
        )
        sink.log_results({"global_step": 0, **document["metrics"], "eval_contract_hash": document["contract_hash"]})
        return 0
    finally:
        sink.close()


def run(argv: list[str] | None = None) -> int:
    """Parse the arguments and evaluate; return the exit code."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    run_args, eval_args = parse_args(argv)
    return main(run_args, eval_args)


if __name__ == "__main__":
    from trainer.termination import last_word

    with last_word():  # an exception that ends the job is its termination message (what Kubernetes relays)
        sys.exit(run())
