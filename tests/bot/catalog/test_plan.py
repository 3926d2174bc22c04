"""Compiling plans: params and their provenance, the operation, and commands that do not fit the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.catalog import Catalog, Plan, PlanError
from bot.grammar import RunCommand
from bot.polyaxon.spec import to_pod_spec
from tests.bot.catalog.planning import plan


def test_sft_tiny_plan_params_provenance_and_operation(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-tiny lr=5e-3 epochs=2 preset=cpu-small,s3-checkpoints --dry-run")
    assert result.dry_run and result.comparable
    assert result.params["learning_rate"] == 5e-3 and result.provenance["learning_rate"] == "command line"
    assert result.params["num_train_epochs"] == 2.0 and isinstance(result.params["num_train_epochs"], float)
    assert result.params["max_steps"] == 40 and result.provenance["max_steps"] == "recipe recipes/sft-tiny.yaml"
    assert result.params["lora_r"] == 16 and result.provenance["lora_r"] == "component default"
    assert result.params["checkpoints_connection"] == "checkpoints-s3"
    assert result.provenance["checkpoints_connection"] == "preset s3-checkpoints"
    assert result.provenance["runPatch.container.resources"] == "preset cpu-small"
    assert result.provenance["eval_contract_hash"].startswith("computed")
    assert result.params["recipe_hash"] == result.recipe_hash == catalog.recipes["sft-tiny"].hash
    assert result.resources["limits"] == {"cpu": "2", "memory": "4Gi"} and result.resources["gpus_total"] == 0
    assert result.operation["kind"] == "operation"
    assert result.operation["component"]["name"] == "trl-sft"
    assert result.operation["params"]["learning_rate"] == {"value": 5e-3}
    assert result.tags == ["recipe:sft-tiny", "preset:cpu-small", "preset:s3-checkpoints", "comparable"]
    assert set(result.params) == set(result.provenance) - {"runPatch.container.resources"}
    assert Plan.model_validate_json(result.model_dump_json()) == result


BAD_COMMANDS = [
    (
        "run recipe=sft-tinny",
        "no recipe 'sft-tinny'; did you mean sft-tiny or sft-tiny-ddp or kto-tiny?",
        ["sft-tiny", "sft-tiny-ddp"],
    ),
    ("run recipe=sft-tiny preset=gpu-9x", "no preset 'gpu-9x'; did you mean", ["gpu-8x", "gpu-1x"]),
    ("run recipe=sft-tiny lrr=1e-3", "recipe sft-tiny has no key 'lrr'; did you mean lr?", ["lr"]),
    ("run recipe=sft-tiny lora_r=4", "lora_r is fixed by recipe sft-tiny", []),
    ("run recipe=sft-tiny lr=abc", "lr=abc: expected float in (0, 0.01]", []),
    ("run recipe=sft-tiny lr=0", "0 is out of bounds: float in (0, 0.01]", []),
    ("run recipe=sft-tiny lr=0.02", "0.02 is out of bounds", []),
    ("run recipe=sft-tiny lr=true", "expected float", []),
    ("run recipe=sft-tiny epochs=21", "21 is out of bounds: int 1..20", []),
    ("run recipe=sft-tiny epochs=0", "out of bounds: int 1..20", []),
    ("run recipe=sft-tiny epochs=2.5", "epochs is an int: write a whole number, not 2.5", []),
    ("run recipe=sft-tiny scheduler=cosin", "did you mean cosine?", []),
    ("run recipe=sft-smollm2-135m use_peft=maybe", "expected true or false", []),
    ("run recipe=sft-tiny preset=ddp-2x8", "preset ddp-2x8 is for pytorchjob components", ["cpu-large"]),
    ("run recipe=sft-qwen-1p5b-ddp preset=gpu-1x", "preset gpu-1x is for job components", ["ddp-2x8"]),
]


@pytest.mark.parametrize(
    ("text", "message", "suggestions"),
    BAD_COMMANDS,
    ids=[
        "unknown-recipe",
        "unknown-preset",
        "unknown-key",
        "fixed-key",
        "wrong-type",
        "lower-bound-open",
        "upper-bound",
        "bool-for-float",
        "int-upper",
        "int-lower",
        "float-for-int",
        "choice-typo",
        "bool-typo",
        "preset-for-distributed",
        "job-preset-on-distributed",
    ],
)
def test_plan_errors(catalog: Catalog, text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(PlanError) as info:
        plan(catalog, text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


def test_axolotl_config_passes_through_verbatim(catalog: Catalog, catalog_dir: Path) -> None:
    result = plan(catalog, "run recipe=axolotl-qwen-7b-lora")
    original = (catalog_dir / "recipes" / "axolotl" / "qwen2.5-7b-lora.yml").read_text()
    assert result.params["config"] == original
    pod = to_pod_spec(result.operation)
    init = [c for c in pod["batchJobSpec"]["template"]["spec"]["initContainers"] if "file" in c["name"]]
    assert len(init) == 1 and any(original.splitlines()[1] in arg for arg in init[0]["args"])


def _with_string_override(fresh_dir: Path) -> Catalog:
    """The shipped catalog with a string override on sft-tiny (no shipped recipe declares one)."""
    recipe = fresh_dir / "recipes" / "sft-tiny.yaml"
    recipe.write_text(
        recipe.read_text(encoding="utf-8") + "  modules: {input: lora_target_modules, type: str}\n", encoding="utf-8"
    )
    return Catalog.load(fresh_dir)


def test_commands_built_in_code_get_the_same_value_guard(fresh_dir: Path) -> None:
    command = RunCommand(recipe="sft-tiny", overrides={"modules": "{{ globals.run_outputs_path }}"})
    with pytest.raises(PlanError, match="is not a plain value"):
        _with_string_override(fresh_dir).plan(command)


def test_string_override_stays_one_argument(fresh_dir: Path) -> None:
    command = RunCommand(recipe="sft-tiny", overrides={"modules": "q_proj v_proj"})
    result = _with_string_override(fresh_dir).plan(command)
    container = to_pod_spec(result.operation)["batchJobSpec"]["template"]["spec"]["containers"][0]
    assert "--lora_target_modules=q_proj v_proj" in container["args"]
    assert container["command"] == ["python", "-m", "trainer"]
