"""The harness eval contract (procedure lm-eval-v1): shipped tiny tasks, digests, the contract hash, its refusals, and
real lm-eval runs of the tiny model (after an SFT run, and by `python -m trainer.eval_run`)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.catalog.digests import content_digest, eval_contract_hash
from tests.trainer.runs import REPO, read_jsonl, tiny_args, train_in_process, trainer_env
from trainer.config import EvalArguments
from trainer.eval_run import parse_args as parse_eval_run_args
from trainer.eval_run import run as eval_run
from trainer.evaluation import EvalContractError
from trainer.harness import harness_contract_from_args, prepare_harness, task_digest
from trainer.harness_run import HarnessRun, harness_metrics, harness_outputs
from trainer.run import EXIT_BAD_BASE
from trainer.tiny_eval_tasks import write_tasks

pytestmark = pytest.mark.trainer

TASKS_DIR = REPO / "manifests" / "evals" / "tasks"
TASK_NAMES = ("tiny_arith", "tiny_capitals")
METRICS = "tiny_capitals-acc,tiny_capitals-acc_norm,tiny_arith-exact_match"


def task_pins(tasks_dir: Path = TASKS_DIR, versions: dict[str, str] | None = None) -> str:
    """`--eval_tasks` pinning the shipped tasks (or those of `tasks_dir`) by version and digest."""
    versions = versions or {}
    return ",".join(f"{name}@{versions.get(name, '1.0')}@{task_digest(tasks_dir / name)}" for name in TASK_NAMES)


def harness_flags(**overrides: Any) -> dict[str, Any]:
    """The eval flags of a harness contract on the shipped tiny tasks; keyword overrides win."""
    flags: dict[str, Any] = {
        "eval_harness": "lm-eval",
        "eval_harness_version": "0.4.13",
        "eval_tasks": task_pins(),
        "eval_tasks_dir": str(TASKS_DIR),
        "eval_chat_template": "true",
        "eval_metrics": METRICS,
        "eval_procedure_version": "lm-eval-v1",
    }
    flags.update(overrides)
    return flags


def eval_arguments(**overrides: Any) -> EvalArguments:
    """`EvalArguments` of the harness contract (`harness_flags`), typed as the parser would."""
    flags = harness_flags(**overrides)
    flags["eval_chat_template"] = str(flags["eval_chat_template"]).lower() == "true"
    return EvalArguments(**flags)


def test_the_task_digest_is_the_bots_content_digest(tmp_path: Path) -> None:
    for name in TASK_NAMES:
        assert task_digest(TASKS_DIR / name) == content_digest(TASKS_DIR / name)
    odd = tmp_path / "odd"  # nested folders, a name that sorts differently as a path and as text, a hidden file
    for relative in ("task.yaml", "a/b.jsonl", "a.jsonl", ".hidden", "__pycache__/x.pyc"):
        (odd / relative).parent.mkdir(parents=True, exist_ok=True)
        (odd / relative).write_text(relative)
    assert task_digest(odd) == content_digest(odd)


def test_the_tiny_task_generator_writes_the_shipped_bytes(tmp_path: Path) -> None:
    write_tasks(tmp_path)
    for name in TASK_NAMES:
        shipped = sorted(p.name for p in (TASKS_DIR / name).iterdir())
        assert shipped == ["task.yaml", "test.jsonl"]
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == shipped
        for file in shipped:
            assert (tmp_path / name / file).read_bytes() == (TASKS_DIR / name / file).read_bytes(), (name, file)
    capitals = [json.loads(line) for line in (TASKS_DIR / "tiny_capitals" / "test.jsonl").read_text().splitlines()]
    assert len(capitals) == 12 and all(len(doc["choices"]) == 4 for doc in capitals)
    assert len({doc["answer"] for doc in capitals}) > 1  # the right answer's position is shuffled


def test_the_contract_hash_is_the_hash_of_the_documented_fields() -> None:
    contract = harness_contract_from_args(eval_arguments(eval_seed=3, eval_limit=5))
    assert contract is not None
    fields = {
        "harness": "lm-eval",
        "harness_version": "0.4.13",
        "tasks": [{"name": name, "version": "1.0", "digest": content_digest(TASKS_DIR / name)} for name in TASK_NAMES],
        "num_fewshot": 0,
        "limit": 5,
        "seed": 3,
        "chat_template": True,
        "metrics": ["tiny_arith-exact_match", "tiny_capitals-acc", "tiny_capitals-acc_norm"],
        "procedure_version": "lm-eval-v1",
    }
    assert contract.fields() == fields
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert contract.hash() == "sha256:" + hashlib.sha256(payload.encode()).hexdigest() == eval_contract_hash(fields)
    pinned = harness_contract_from_args(eval_arguments(eval_seed=3, eval_limit=5, eval_contract_hash=contract.hash()))
    assert pinned == contract


def tampered_tasks(tmp_path: Path) -> Path:
    """A copy of the shipped tasks whose tiny_capitals data changed by one byte."""
    copy = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, copy)
    data = copy / "tiny_capitals" / "test.jsonl"
    data.write_text(data.read_text().replace("Paris", "Parix", 1))
    return copy


REFUSALS = [
    pytest.param(
        {"eval_tasks_dir": "TAMPERED"},
        r"eval task tiny_capitals: folder .*tiny_capitals has digest sha256:\w+, the contract pins sha256:\w+",
        id="tampered-task-data",
    ),
    pytest.param(
        {"eval_tasks": task_pins(versions={"tiny_arith": "2.0"})},
        "eval task tiny_arith: task.yaml has metadata.version 1.0, the contract pins 2.0",
        id="wrong-task-version",
    ),
    pytest.param(
        {"eval_harness_version": "0.4.12"},
        "the eval contract pins lm-eval 0.4.12; this environment has 0.4.13",
        id="wrong-lm-eval-version",
    ),
    pytest.param(
        {"eval_metrics": "tiny_capitals-acc,tiny_spelling-acc"},
        r"eval metric tiny_spelling-acc is not TASK-METRIC for a task the contract lists",
        id="metric-of-an-unknown-task",
    ),
    pytest.param(
        {"eval_metrics": "tiny_capitals-exact_match"},
        r"eval metric tiny_capitals-exact_match: task tiny_capitals has no metric 'exact_match' "
        r"\(its metric_list: acc, acc_norm\)",
        id="metric-the-task-lacks",
    ),
    pytest.param(
        {"eval_contract_hash": "sha256:" + "0" * 64},
        r"eval contract hash is sha256:\w+, the recipe pins sha256:0{64}",
        id="contract-hash-mismatch",
    ),
    pytest.param(
        {"eval_tasks": "tiny_arith@1.0"}, "eval task 'tiny_arith@1.0' is not NAME@VERSION@sha256:HEX", id="bad-pin"
    ),
    pytest.param(
        {"eval_procedure_version": "v1"},
        "the lm-eval harness is evaluated by procedure lm-eval-v1; the contract names v1",
        id="wrong-procedure",
    ),
    pytest.param(
        {"eval_dataset_name": "manifests/datasets/tiny-chat"},
        "a run has one eval contract: --eval_harness and --eval_dataset_name are both set",
        id="two-contracts",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), REFUSALS)
def test_a_contract_the_tasks_or_the_environment_do_not_match_is_refused(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    if overrides.get("eval_tasks_dir") == "TAMPERED":
        overrides = {"eval_tasks_dir": str(tampered_tasks(tmp_path))}
    with pytest.raises(EvalContractError, match=message):
        prepare_harness(eval_arguments(**overrides))


def test_a_task_whose_data_is_outside_its_folder_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, copy)
    config = (copy / "tiny_arith" / "task.yaml").read_text().replace("test: test.jsonl", "test: ../x.jsonl")
    (copy / "tiny_arith" / "task.yaml").write_text(config)
    (copy / "x.jsonl").write_text("{}\n")
    pins = task_pins(copy)
    with pytest.raises(EvalContractError, match=r"data_files.test '../x.jsonl' is not a file in"):
        prepare_harness(eval_arguments(eval_tasks=pins, eval_tasks_dir=str(copy)))


def test_stderr_is_null_where_lm_eval_gives_none_and_outputs_name_every_metric() -> None:
    contract = harness_contract_from_args(eval_arguments())
    assert contract is not None
    results = {
        "tiny_capitals": {
            **{"acc,none": 0.5, "acc_stderr,none": 0.1},
            **{"acc_norm,none": 0.25, "acc_norm_stderr,none": "N/A"},
        },
        "tiny_arith": {"exact_match,none": 0.0},
    }
    metrics, stderr = harness_metrics(contract, HarnessRun(results={"results": results}, samples={}))
    assert metrics == {"tiny_arith-exact_match": 0.0, "tiny_capitals-acc": 0.5, "tiny_capitals-acc_norm": 0.25}
    assert stderr == {"tiny_arith-exact_match": None, "tiny_capitals-acc": 0.1, "tiny_capitals-acc_norm": None}
    document = {
        "metrics": metrics,
        "stderr": stderr,
        "harness": {"version": "0.4.13", "tasks": {"tiny_capitals": {"hash": "c"}, "tiny_arith": {"hash": "a"}}},
    }
    assert harness_outputs(document) == {
        **metrics,
        "tiny_capitals-acc_stderr": 0.1,
        "eval_task_hashes": "tiny_arith=a,tiny_capitals=c",
        "eval_harness_version": "0.4.13",
    }


def test_the_lm_eval_component_args_parse_with_eval_run() -> None:
    component = yaml.safe_load((REPO / "manifests" / "components" / "lm-eval.yaml").read_text())
    values = {spec["name"]: spec.get("value", f"<{spec['name']}>") for spec in component["inputs"]}
    values.update(eval_chat_template=True, eval_limit=4)
    args = []
    for arg in component["run"]["container"]["args"]:
        for name, value in values.items():
            arg = arg.replace("{{ " + name + " }}", str(value))
        args.append(arg)
    run_args, eval_args = parse_eval_run_args(args)
    assert run_args.model_name_or_path == "<model_name_or_path>" and run_args.image_digest == "<image>"
    assert eval_args.eval_chat_template is True and eval_args.eval_limit == 4
    assert eval_args.eval_procedure_version == "lm-eval-v1" and eval_args.eval_tasks_dir == "manifests/evals/tasks"
    named = {name for name in values if name not in ("image", "checkpoints_connection")}
    assert named <= {arg.split("=", 1)[0].removeprefix("--") for arg in component["run"]["container"]["args"]}


def test_a_training_run_refuses_tampered_tasks_before_anything_loads(tiny_model: Path, tmp_path: Path) -> None:
    flags = harness_flags(eval_tasks_dir=str(tampered_tasks(tmp_path)))
    with pytest.raises(EvalContractError, match="eval task tiny_capitals: folder"):
        train_in_process(tiny_args(tiny_model, tmp_path / "out", **flags))
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def harness_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-step SFT run (checkpoints every 2 steps, keeping 1) whose final model lm-eval evaluates."""
    out = tmp_path_factory.mktemp("harness-run")
    argv = tiny_args(tiny_model, out, max_steps=4, save_steps=2, save_total_limit=1, eval_steps=2, **harness_flags())
    assert train_in_process(argv) == 0
    return out


def check_results(document: dict[str, Any], global_step: int) -> None:
    """What every harness eval_results.json holds."""
    assert set(document) >= {"contract", "contract_hash", "metrics", "stderr", "harness", "global_step", "pins"}
    assert document["contract_hash"] == eval_contract_hash(document["contract"])
    assert document["pins"]["eval_contract_hash"] == document["contract_hash"]
    assert document["global_step"] == global_step
    assert sorted(document["metrics"]) == sorted(METRICS.split(",")) == sorted(document["stderr"])
    assert all(0.0 <= value <= 1.0 for value in document["metrics"].values())
    assert all(isinstance(value, float) for value in document["stderr"].values())
    assert document["harness"]["name"] == "lm-eval" and document["harness"]["version"] == "0.4.13"
    tasks = document["harness"]["tasks"]
    assert sorted(tasks) == list(TASK_NAMES)
    assert tasks["tiny_capitals"]["n_samples"] == 12 and tasks["tiny_arith"]["n_samples"] == 16
    for name, task in tasks.items():
        assert len(task["hash"]) == 64 and task["digest"] == content_digest(TASKS_DIR / name)
        assert task["version"] == "1.0" and task["num_fewshot"] == 0 and task["limit"] == 0


def test_an_sft_run_with_a_harness_contract_evaluates_its_final_model(harness_run: Path) -> None:
    document = json.loads((harness_run / "eval_results.json").read_text())
    check_results(document, global_step=4)
    samples = [json.loads(line) for line in (harness_run / "eval_samples.jsonl").read_text().splitlines()]
    assert len(samples) == 28 and {s["task"] for s in samples} == set(TASK_NAMES)
    records = read_jsonl(harness_run / "metrics.jsonl")
    assert not any(k.startswith("eval_") for r in records if r["kind"] == "metrics" for k in r["metrics"])
    harness_metrics_logged = [r for r in records if r["kind"] == "metrics" and "tiny_capitals-acc" in r["metrics"]]
    assert [r["step"] for r in harness_metrics_logged] == [4]
    outputs: dict[str, Any] = {}
    for record in records:
        if record["kind"] == "outputs":
            outputs.update(record["outputs"])
    hashes = document["harness"]["tasks"]
    assert outputs["eval_task_hashes"] == ",".join(f"{n}={hashes[n]['hash']}" for n in TASK_NAMES)
    assert outputs["eval_harness_version"] == "0.4.13" and outputs["eval_results_digest"].startswith("sha256:")
    assert outputs["tiny_capitals-acc_stderr"] == document["stderr"]["tiny_capitals-acc"]
    results = [r["results"] for r in records if r["kind"] == "results"][-1]
    assert results["eval_contract_hash"] == document["contract_hash"]
    assert results["tiny_capitals-acc"] == document["metrics"]["tiny_capitals-acc"]
    # Checkpoints are kept and rotated as without a harness (no best-checkpoint tracking).
    assert sorted(p.name for p in harness_run.glob("checkpoint-*")) == ["checkpoint-4"]


def test_eval_run_of_the_same_model_from_its_run_gives_the_same_numbers_and_hashes(
    harness_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained = json.loads((harness_run / "eval_results.json").read_text())
    records = read_jsonl(harness_run / "metrics.jsonl")
    outputs = {key: value for r in records if r["kind"] == "outputs" for key, value in r["outputs"].items()}
    context = tmp_path / "context"  # what Polyaxon's init step makes of the base run's outputs/model
    shutil.copytree(harness_run / "model", context / "artifacts" / "run-uuid" / "outputs" / "model")
    monkeypatch.setenv("POLYAXON_CONTEXT_ROOT", str(context))
    flags = harness_flags(eval_contract_hash=trained["contract_hash"])
    argv = [
        "--model_name_or_path=outputs/model",
        "--base_run=run-uuid",
        f"--base_model_digest={outputs['model_digest']}",
        f"--output_dir={tmp_path / 'out'}",
        "--subject=run tiny-sft",
        *(f"--{key}={value}" for key, value in flags.items()),
    ]
    assert eval_run(argv) == 0
    evaluated = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    check_results(evaluated, global_step=0)
    assert evaluated["metrics"] == trained["metrics"] and evaluated["stderr"] == trained["stderr"]
    assert evaluated["harness"]["tasks"] == trained["harness"]["tasks"]
    assert evaluated["subject"] == evaluated["pins"]["subject"] == "run tiny-sft"
    assert evaluated["pins"]["model_digest"] == outputs["model_digest"]
    assert evaluated["pins"]["model"] == f"run run-uuid: outputs/model@{outputs['model_digest']}"

    wrong = [arg if not arg.startswith("--base_model_digest") else "--base_model_digest=sha256:0" for arg in argv]
    assert eval_run([*wrong[:3], f"--output_dir={tmp_path / 'refused'}", *wrong[4:]]) == EXIT_BAD_BASE
    assert not (tmp_path / "refused").exists()


def test_python_m_trainer_eval_run_evaluates_a_model_folder(tiny_model: Path, tmp_path: Path) -> None:
    flags = harness_flags(eval_limit=4)
    command = [
        sys.executable,
        "-m",
        "trainer.eval_run",
        f"--model_name_or_path={tiny_model}",
        f"--output_dir={tmp_path}",
        *(f"--{key}={value}" for key, value in flags.items()),
    ]
    done = subprocess.run(command, cwd=REPO, env=trainer_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads((tmp_path / "eval_results.json").read_text())
    assert document["global_step"] == 0 and document["contract"]["limit"] == 4
    assert {name: task["n_samples"] for name, task in document["harness"]["tasks"].items()} == {
        "tiny_arith": 4,
        "tiny_capitals": 4,
    }
    assert all(0.0 <= value <= 1.0 for value in document["metrics"].values())
    assert len((tmp_path / "eval_samples.jsonl").read_text().splitlines()) == 8
