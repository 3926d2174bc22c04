"""The catalog: loading and validating manifests, compiling plans, the pin gate, provenance, hashes."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest

from bot.catalog import Catalog, CatalogError, Plan, PlanError, check_catalog, content_digest, eval_contract_hash
from bot.grammar import RunCommand, parse_command
from bot.polyaxon.spec import to_pod_spec
from tests.manifests.catalog_repo import make_repo, write


@pytest.fixture(scope="module")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped catalog with a tiny model folder, shared by the read-only tests."""
    return make_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def catalog(catalog_dir: Path) -> Catalog:
    """The shipped catalog, loaded once."""
    return Catalog.load(catalog_dir)


@pytest.fixture
def fresh_dir(tmp_path: Path) -> Path:
    """A private copy of the catalog that a test may edit."""
    return make_repo(tmp_path / "repo")


def plan(catalog: Catalog, text: str, **kwargs: bool) -> Plan:
    """Parse and plan one command line."""
    command = parse_command(text)
    assert isinstance(command, RunCommand)
    return catalog.plan(command, **kwargs)


def test_shipped_catalog_loads(catalog: Catalog) -> None:
    assert {"sft-tiny", "sft-lora"} <= set(catalog.recipes)
    assert {"cpu-small", "gpu-1x", "gpu-8x", "spot"} <= set(catalog.presets)
    assert set(catalog.components) == {"trl-sft", "trl-sft-distributed", "axolotl", "quickstart"}
    for preset in catalog.presets.values():
        assert preset.description and "\n" not in preset.description
        assert "name" not in preset.document and "description" not in preset.document
    recipe = catalog.recipes["sft-tiny"]
    assert recipe.hash == "sha256:" + hashlib.sha256(recipe.path.read_bytes()).hexdigest()


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


def test_default_presets_come_from_the_recipe(catalog: Catalog) -> None:
    assert plan(catalog, "run recipe=sft-tiny").presets == ["cpu-small"]
    assert plan(catalog, "run recipe=sft-tiny preset=gpu-1x").presets == ["gpu-1x"]


def test_local_pins_are_the_trainers_digests(catalog: Catalog, catalog_dir: Path) -> None:
    from trainer.data import dataset_digest
    from trainer.evaluation import contract_hash

    result = plan(catalog, "run recipe=sft-tiny")
    data = catalog_dir / "datasets" / "tiny-chat"
    assert result.params["dataset_digest"] == dataset_digest(data)
    assert result.pins["dataset"] == f"manifests/datasets/tiny-chat@{dataset_digest(data)}"
    assert result.eval_contract_hash == contract_hash(result.eval_contract) == result.params["eval_contract_hash"]
    assert result.eval_contract["revision"] == dataset_digest(data)
    assert re.fullmatch(r"\.finetune/models/tiny-llama@sha256:[0-9a-f]{64}", result.pins["model"])
    assert result.pins["code"] == content_digest(catalog_dir.parent / "trainer", (".py",))


def test_trainer_accepts_the_eval_contract(catalog: Catalog) -> None:
    from trainer.config import EvalArguments
    from trainer.evaluation import contract_from_args

    result = plan(catalog, "run recipe=sft-tiny")
    fields = {name: result.params[name] for name in EvalArguments.__dataclass_fields__ if name in result.params}
    contract = contract_from_args(EvalArguments(**fields))  # raises if the pinned hash differs
    assert contract is not None and contract.split == "eval"


def test_eval_contract_hash_is_order_independent() -> None:
    base = {"dataset": "d", "revision": "r", "split": "eval", "max_samples": 0, "procedure_version": "v1", "seed": 0}
    assert eval_contract_hash({**base, "metrics": ["b", "a"]}) == eval_contract_hash(
        {**base, "metrics": ["a", "b", "a"]}
    )
    assert eval_contract_hash({**base, "metrics": ["a"]}) != eval_contract_hash({**base, "seed": 1, "metrics": ["a"]})


def test_model_pin_follows_the_files(fresh_dir: Path) -> None:
    before = plan(Catalog.load(fresh_dir), "run recipe=sft-tiny").pins["model"]
    (fresh_dir.parent / ".finetune" / "models" / "tiny-llama" / "model.safetensors").write_bytes(b"retrained")
    after = plan(Catalog.load(fresh_dir), "run recipe=sft-tiny").pins["model"]
    assert before != after


def test_missing_local_model_says_how_to_build_it(tmp_path: Path) -> None:
    catalog = Catalog.load(make_repo(tmp_path / "repo", with_model=False))
    with pytest.raises(PlanError, match=r"python -m trainer\.tiny_model \.finetune/models/tiny-llama"):
        plan(catalog, "run recipe=sft-tiny")
    relaxed = plan(catalog, "run recipe=sft-tiny", require_local=False)
    assert relaxed.pins["model"].endswith("@unbuilt")
    assert any("not built" in warning for warning in relaxed.warnings)
    assert relaxed.memory is None


def test_local_dataset_pinned_digest_must_match(fresh_dir: Path) -> None:
    recipe = fresh_dir / "recipes" / "sft-tiny.yaml"
    text = recipe.read_text().replace("  split: train\n", "  split: train\n  digest: sha256:" + "0" * 64 + "\n", 1)
    recipe.write_text(text)
    with pytest.raises(PlanError, match="changed: its digest is sha256:"):
        plan(Catalog.load(fresh_dir), "run recipe=sft-tiny")


PIN_CASES = [
    (
        "image: ghcr.io/finetune-bot/trainer@sha256:dda8",
        "image: ghcr.io/finetune-bot/trainer:latest\n#",
        "floating tag",
    ),
    ("  revision: 04e05ee7960fdeb388a2533000606fa127aed615", "  revision: main", "model revision 'main'"),
    ("  revision: 74d00a4527076fe5d19d4211aa2db1a930aee10b", "  revision: v1.0", "dataset revision 'v1.0'"),
    (
        "  digest: sha256:891fe019decbff3bdd6af41950bfecc2fbf019e9c1f7ef7603bb40f8db4186c4\n",
        "",
        "has no content digest",
    ),
    ("code: {revision: 31f2ffa07aa2ffee072757a9dab0df79508c4fb9}", "code: {revision: main}", "code revision 'main'"),
]


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    PIN_CASES,
    ids=["floating-image-tag", "model-branch", "dataset-tag", "missing-dataset-digest", "code-branch"],
)
def test_pin_gate(fresh_dir: Path, old: str, new: str, reason: str) -> None:
    recipe = fresh_dir / "recipes" / "sft-qwen-0p5b-lora.yaml"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new, 1))
    with pytest.raises(PlanError) as info:
        plan(Catalog.load(fresh_dir), "run recipe=sft-qwen-0p5b-lora")
    assert "is not pinned" in info.value.message and reason in info.value.message
    assert "exploration: true" in info.value.message
    recipe.write_text(text.replace(old, new, 1) + "exploration: true\n")
    explored = plan(Catalog.load(fresh_dir), "run recipe=sft-qwen-0p5b-lora")
    assert not explored.comparable and "non-comparable" in explored.tags
    assert any(reason in item for item in explored.unpinned)
    assert any(w.startswith("non-comparable") for w in explored.warnings)


def test_exploration_recipe_is_non_comparable(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=explore-qwen-0p5b")
    assert result.comparable is False
    assert len(result.unpinned) == 3


BAD_COMMANDS = [
    ("run recipe=sft-tinny", "no recipe 'sft-tinny'; did you mean sft-tiny?", ["sft-tiny"]),
    ("run recipe=sft-tiny preset=gpu-9x", "no preset 'gpu-9x'; did you mean", ["gpu-8x", "gpu-1x"]),
    ("run recipe=sft-tiny lrr=1e-3", "recipe sft-tiny has no key 'lrr'; did you mean lr?", ["lr"]),
    ("run recipe=sft-tiny lora_r=4", "lora_r is fixed by recipe sft-tiny", []),
    ("run recipe=sft-tiny lr=abc", "lr=abc: expected float in (0, 0.01]", []),
    ("run recipe=sft-tiny lr=0", "0 is out of bounds: float in (0, 0.01]", []),
    ("run recipe=sft-tiny lr=0.02", "0.02 is out of bounds", []),
    ("run recipe=sft-tiny lr=true", "expected float", []),
    ("run recipe=sft-tiny epochs=21", "21 is out of bounds: int 1..20", []),
    ("run recipe=sft-tiny epochs=0", "out of bounds: int 1..20", []),
    ("run recipe=sft-tiny epochs=2.5", "expected a whole number", []),
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


def test_presets_stack_in_order(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-qwen-0p5b-lora preset=gpu-1x,spot")
    assert result.resources["node_selector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "cloud.google.com/gke-spot": "true",
    }
    assert [t["key"] for t in result.resources["tolerations"]] == ["nvidia.com/gpu", "cloud.google.com/gke-spot"]
    assert result.resources["max_retries"] == 3 and result.resources["queue"] == "gpu"
    assert result.provenance["runPatch.environment.tolerations"] == "preset gpu-1x, preset spot"
    assert result.provenance["termination.maxRetries"] == "preset spot"
    later = plan(catalog, "run recipe=sft-qwen-0p5b-lora preset=gpu-1x,gpu-8x")
    assert later.resources["gpus_total"] == 8  # the later preset wins


def test_several_gpus_on_a_job_component_warn(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-qwen-0p5b-lora preset=gpu-8x")
    assert any(
        "adding GPU requests alone does not distribute a single-process training script — use trl-sft-distributed" in w
        for w in result.warnings
    )
    assert not any("distribute" in w for w in plan(catalog, "run recipe=sft-qwen-0p5b-lora").warnings)


def test_distributed_plan_resources(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-qwen-1p5b-ddp")
    assert result.resources["run_kind"] == "pytorchjob"
    assert result.resources["replicas"] == 2 and result.resources["gpus_total"] == 16
    assert result.memory is not None and result.memory.fits is True


def test_memory_over_budget_is_in_the_plan(catalog: Catalog) -> None:
    lora = plan(catalog, "run recipe=sft-llama31-8b-lora")
    assert lora.memory is not None and lora.memory.fits is True
    full = plan(catalog, "run recipe=sft-llama31-8b-lora use_peft=false")
    assert full.memory is not None and full.memory.fits is False
    warning = next(w for w in full.warnings if w.startswith("preflight memory"))
    assert "OVER BUDGET" in warning and "vs 80 GiB" in warning and "8,030.3M params" in warning
    tiny = plan(catalog, "run recipe=sft-tiny")
    assert tiny.memory is not None and tiny.memory.device == "cpu" and tiny.memory.fits is True


def test_axolotl_config_passes_through_verbatim(catalog: Catalog, catalog_dir: Path) -> None:
    result = plan(catalog, "run recipe=axolotl-qwen-7b-lora")
    original = (catalog_dir / "recipes" / "axolotl" / "qwen2.5-7b-lora.yml").read_text()
    assert result.params["config"] == original
    pod = to_pod_spec(result.operation)
    init = [c for c in pod["batchJobSpec"]["template"]["spec"]["initContainers"] if "file" in c["name"]]
    assert len(init) == 1 and any(original.splitlines()[1] in arg for arg in init[0]["args"])


def test_commands_built_in_code_get_the_same_value_guard(catalog: Catalog) -> None:
    command = RunCommand(recipe="sft-tiny", overrides={"resume_from": "{{ globals.run_outputs_path }}"})
    with pytest.raises(PlanError, match="is not a plain value"):
        catalog.plan(command)


def test_string_override_stays_one_argument(catalog: Catalog) -> None:
    result = plan(catalog, 'run recipe=sft-tiny resume_from="runs/a b/outputs"')
    container = to_pod_spec(result.operation)["batchJobSpec"]["template"]["spec"]["containers"][0]
    assert "--resume_from=runs/a b/outputs" in container["args"]
    assert container["command"] == ["python", "-m", "trainer"]


MALFORMED = [
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nparams:\n  learning_rate: {value: 1}\n",
        "presets/bad.yaml: params.learning_rate: a training key",
    ),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nrunPatch:\n  container:\n    args: [--lr=1]\n",
        "presets/bad.yaml: runPatch.container.args: a preset may not change the command",
    ),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nrunPatch:\n"
        "  environment:\n    labels: {max_steps: '9'}\n",
        "presets/bad.yaml: runPatch.environment.labels.max_steps: max_steps is a training key",
    ),
    ("presets/bad.yaml", "name: bad\nkind: operation\nisPreset: true\n", "presets/bad.yaml: description:"),
    ("presets/bad.yaml", "name: other\ndescription: x\nkind: operation\nisPreset: true\n", "presets/bad.yaml: name:"),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nrun: {kind: job}\n",
        "presets/bad.yaml: run: not a preset key",
    ),
    ("presets/bad.yaml", "name: bad\ndescription: [unclosed\n", "presets/bad.yaml: (file): not valid YAML"),
    ("recipes/bad.yaml", "name: bad\ndescription: x\ncomponent: trl-sft\nlrate: 1\n", "recipes/bad.yaml: lrate:"),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sf\n",
        "no component 'trl-sf'; did you mean trl-sft?",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\ndefaults: {learning_rat: 1.0}\n",
        "recipes/bad.yaml: defaults.learning_rat: not an input of component trl-sft; did you mean learning_rate?",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\n"
        "overrides: {lr: {input: learning_rate, type: 'float from 0'}}\n",
        "recipes/bad.yaml: overrides.lr.type: unreadable type",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\ndefaults: {learning_rate: 0.5}\n"
        "overrides: {lr: {input: learning_rate, type: 'float in (0, 1e-2]'}}\n",
        "recipes/bad.yaml: defaults.learning_rate: the recipe's own default: 0.5 is out of bounds",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\noverrides: {gpus: {input: lora_r, type: int}}\n",
        "recipes/bad.yaml: overrides.gpus: a cluster setting",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\nmodel: {id: a/b, path: ./m}\n",
        "recipes/bad.yaml: model: give either `path`",
    ),
    ("recipes/bad.yaml", "name: bad\ndescription: x\ncomponent: trl-sft\npresets: [gpu-2x]\n", "no preset 'gpu-2x'"),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\ndefaults: {model_name_or_path: other/model}\n",
        "recipes/bad.yaml: defaults.model_name_or_path: set from the recipe's pins",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\noverrides: {model: {input: model_name_or_path, type: str}}\n",
        "recipes/bad.yaml: overrides.model: model_name_or_path is pinned by the recipe",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: axolotl\naxolotl_config: axolotl/bad.yml\n",
        "recipes/bad.yaml: axolotl_config: contains Jinja",
    ),
    ("components/bad.yaml", "kind: operation\nname: bad\n", "components/bad.yaml: kind: expected `kind: component`"),
]


@pytest.mark.parametrize(
    ("relative", "text", "message"),
    MALFORMED,
    ids=[
        "preset-training-param",
        "preset-changes-args",
        "preset-training-key-deep",
        "preset-no-description",
        "preset-name-mismatch",
        "preset-unknown-key",
        "preset-bad-yaml",
        "recipe-unknown-field",
        "recipe-unknown-component",
        "recipe-default-not-an-input",
        "recipe-bad-override-type",
        "recipe-default-out-of-bounds",
        "recipe-cluster-override",
        "recipe-model-both-path-and-id",
        "recipe-unknown-preset",
        "recipe-default-sets-a-pin",
        "recipe-override-sets-a-pin",
        "recipe-axolotl-jinja",
        "component-wrong-kind",
    ],
)
def test_malformed_manifests_name_file_and_field(fresh_dir: Path, relative: str, text: str, message: str) -> None:
    write(fresh_dir, "recipes/axolotl/bad.yml", "base_model: x\nchat_template_jinja: '{{ bos_token }}'\n")
    write(fresh_dir, relative, text)
    with pytest.raises(CatalogError) as info:
        Catalog.load(fresh_dir)
    assert message in str(info.value)
    assert check_catalog(fresh_dir) == [str(info.value)]


def test_axolotl_config_must_match_the_pins(fresh_dir: Path) -> None:
    config = fresh_dir / "recipes" / "axolotl" / "qwen2.5-7b-lora.yml"
    config.write_text(config.read_text().replace("base_model: Qwen/Qwen2.5-7B-Instruct", "base_model: Qwen/Qwen2.5-3B"))
    with pytest.raises(CatalogError, match=r"base_model 'Qwen/Qwen2\.5-3B' is not the pinned model"):
        Catalog.load(fresh_dir)


def test_check_catalog_reports_a_pair_that_fails(fresh_dir: Path) -> None:
    # A preset Polyaxon itself refuses: `termination.maxRetries` must be an int.
    write(
        fresh_dir,
        "presets/broken.yaml",
        "name: broken\ndescription: x\nkind: operation\nisPreset: true\ntermination: {maxRetries: many}\n",
    )
    problems = check_catalog(fresh_dir)
    assert problems and all("x broken: " in p and "Polyaxon refused the operation" in p for p in problems)
    assert len(problems) == len(Catalog.load(fresh_dir).recipes)


def test_catalog_without_model_still_checks(tmp_path: Path) -> None:
    catalog_dir = make_repo(tmp_path / "repo", with_model=False)
    assert check_catalog(catalog_dir) == []
    shutil.rmtree(catalog_dir / "recipes")
    assert check_catalog(catalog_dir) == ["recipes/: (folder): no recipes found"]
