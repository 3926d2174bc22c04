"""Every shipped recipe x preset through Polyaxon's checker and Kubernetes converter, and the trainer contract."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.catalog import Catalog, Plan, PlanError, check_catalog
from bot.grammar import RunCommand
from bot.polyaxon.spec import OperationSpecError, compile_operation, to_pod_spec
from tests.manifests.catalog_repo import MANIFESTS, REPO, make_repo

SHIPPED = Catalog.load(MANIFESTS)
PAIRS = [(recipe, preset) for recipe in SHIPPED.recipes for preset in SHIPPED.presets]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The shipped catalog with a tiny model folder, so local recipes plan fully."""
    return Catalog.load(make_repo(tmp_path_factory.mktemp("repo")))


def plan(catalog: Catalog, recipe: str, presets: list[str], *, require_local: bool = True, **overrides: Any) -> Plan:
    """Plan one recipe with the given presets."""
    return catalog.plan(RunCommand(recipe=recipe, presets=presets, overrides=overrides), require_local=require_local)


def pod(plan_: Plan) -> dict[str, Any]:
    """The pod template spec of a single-pod job."""
    spec: dict[str, Any] = to_pod_spec(plan_.operation)["batchJobSpec"]["template"]["spec"]
    return spec


def test_manifests_check_passes_on_the_repository() -> None:
    """What `finetune-bot manifests check` runs in CI (no local model needed)."""
    assert check_catalog(MANIFESTS) == []


@pytest.mark.parametrize(("recipe", "preset"), PAIRS, ids=[f"{r}x{p}" for r, p in PAIRS])
def test_recipe_x_preset(catalog: Catalog, recipe: str, preset: str) -> None:
    kind = catalog.components[catalog.recipes[recipe].spec.component].run_kind
    target = catalog.presets[preset].target_kind
    if target not in (None, kind):
        with pytest.raises(PlanError, match=f"preset {preset} is for {target} components"):
            plan(catalog, recipe, [preset], require_local=False)
        return
    result = plan(catalog, recipe, [preset], require_local=False)
    assert result.operation["component"]["name"] == catalog.recipes[recipe].spec.component
    resource = to_pod_spec(result.operation)
    # Polyaxon's operator resource: a batch job spec, or a Kubeflow PyTorchJob spec.
    assert ("batchJobSpec" if kind == "job" else "pytorchJobSpec") in resource


def test_cpu_small_sets_container_resources(catalog: Catalog) -> None:
    spec = pod(plan(catalog, "sft-tiny", ["cpu-small"]))
    main = spec["containers"][0]
    assert main["name"] == "polyaxon-main"
    assert main["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert "nodeSelector" not in spec or not spec["nodeSelector"]


def test_gpu_1x_sets_gpu_and_placement(catalog: Catalog) -> None:
    spec = pod(plan(catalog, "sft-qwen-0p5b-lora", ["gpu-1x"]))
    main = spec["containers"][0]
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_spot_stacks_on_gpu_1x(catalog: Catalog) -> None:
    spec = pod(plan(catalog, "sft-qwen-0p5b-lora", ["gpu-1x", "spot"]))
    assert spec["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "cloud.google.com/gke-spot": "true",
    }
    assert [t["key"] for t in spec["tolerations"]] == ["nvidia.com/gpu", "cloud.google.com/gke-spot"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_connections_are_mounted(catalog: Catalog) -> None:
    default = pod(plan(catalog, "sft-tiny", ["cpu-small"]))["containers"][0]
    assert "/plx-context/artifacts" in [m["mountPath"] for m in default["volumeMounts"]]
    s3 = pod(plan(catalog, "sft-tiny", ["cpu-small", "s3-checkpoints"]))["containers"][0]
    assert "/connections/checkpoints-s3" in [m["mountPath"] for m in s3["volumeMounts"]]


def test_distributed_recipe_is_a_pytorchjob(catalog: Catalog) -> None:
    resource = to_pod_spec(plan(catalog, "sft-qwen-1p5b-ddp", ["ddp-2x8"]).operation)
    replicas = resource["pytorchJobSpec"]["replicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    for role in ("Master", "Worker"):
        assert replicas[role]["replicas"] == 1
        main = replicas[role]["template"]["spec"]["containers"][0]
        assert main["command"] == ["torchrun"]
        assert main["args"][:3] == ["--nproc_per_node=gpu", "-m", "trainer"]
        assert main["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_quickstart_runs_an_inline_pytorch_script(catalog: Catalog) -> None:
    main = pod(plan(catalog, "quickstart", ["cpu-small"], epochs=3))["containers"][0]
    assert main["command"] == ["python", "-u", "-c"]
    assert "import torch" in main["args"][0] and "--epochs=3" in main["args"]


def test_quickstart_tf_runs_an_inline_keras_script_checked_by_polyaxon(catalog: Catalog) -> None:
    """Polyaxon's checker compiles it (the plan) and its converter makes the pod: a Keras script, pinned."""
    compiled = plan(catalog, "quickstart-tf", ["cpu-small"], epochs=3, lr=0.1)
    main = pod(compiled)["containers"][0]
    assert main["command"] == ["python", "-u", "-c"]
    assert "import keras" in main["args"][0] and "PolyaxonCallback" in main["args"][0]
    assert "--epochs=3" in main["args"] and "--lr=0.1" in main["args"]
    assert compiled.pins["image"].startswith("docker.io/tensorflow/tensorflow@sha256:")
    assert compiled.pins["code"].startswith("sha256:") and compiled.comparable


def test_compile_operation_translates_polyaxon_errors(catalog: Catalog) -> None:
    component = catalog.components["trl-sft"].document
    with pytest.raises(OperationSpecError, match=r"Polyaxon refused the operation: .*learning_rate"):
        compile_operation(
            component, [], {"learning_rate": "fast", "image": "x", "model_name_or_path": "m", "dataset_name": "d"}
        )


def _trl_argv(plan_: Plan) -> list[str]:
    main = pod(plan_)["containers"][0]
    assert main["command"] == ["python", "-m", "trainer"]
    return [str(arg) for arg in main["args"]]


@pytest.mark.trainer
@pytest.mark.parametrize("recipe", ["sft-tiny", "sft-lora"])
def test_component_args_parse_with_the_trainer(catalog: Catalog, recipe: str) -> None:
    """The trl-sft component calls exactly the trainer's flags (parsed by TrlParser, nothing left over)."""
    from trainer.config import parse_args

    result = plan(catalog, recipe, [], lr=4e-3)
    script, training, model, evaluation = parse_args(_trl_argv(result))
    assert training.learning_rate == 4e-3 and training.max_steps == 40 and training.bf16 is False
    assert model.model_name_or_path == ".finetune/models/tiny-llama" and model.dtype == "float32"
    assert model.use_peft is (recipe == "sft-lora")
    assert script.dataset_name == "manifests/datasets/tiny-chat"
    assert script.dataset_digest == result.params["dataset_digest"]
    assert script.recipe_hash == result.recipe_hash and script.code_revision == result.pins["code"]
    assert evaluation.eval_contract_hash == result.eval_contract_hash and evaluation.eval_max_samples == 32


@pytest.mark.slow
@pytest.mark.trainer
def test_sft_tiny_trains_end_to_end_from_the_plan(tmp_path: Path) -> None:
    """Build the real tiny model, compile sft-tiny, run the compiled command as the local agent would."""
    catalog_dir = make_repo(tmp_path / "repo", with_model=False)
    root = catalog_dir.parent
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    env.pop("POLYAXON_RUN_INSTANCE", None)
    build = [sys.executable, "-m", "trainer.tiny_model", ".finetune/models/tiny-llama"]
    subprocess.run(build, cwd=root, env=env, check=True, timeout=300)
    result = Catalog.load(catalog_dir).plan(RunCommand(recipe="sft-tiny", overrides={"max_steps": 4}))
    argv = [sys.executable, "-m", "trainer", *_trl_argv(result)[0:], f"--output_dir={tmp_path / 'out'}"]
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert REPO.exists()
