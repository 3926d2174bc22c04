"""The catalog's TRL trainers (issue 36): components, datasets in TRL's formats, reward functions, eval procedures
and memory, checked when the catalog loads and per run, before anything is submitted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.catalog import Catalog, CatalogError, PlanError
from bot.catalog.check import check_catalog
from bot.catalog.trainers import PROCEDURES, TRAINER_KINDS, component_trainer, reward_metric
from bot.grammar import RunCommand, SweepCommand, parse_command
from tests.manifests.catalog_repo import write

ALIGN_RECIPES = ("dpo-tiny", "kto-tiny", "reward-tiny", "grpo-tiny", "rloo-tiny")


def run_command(text: str) -> RunCommand:
    cmd = parse_command(text)
    assert isinstance(cmd, RunCommand)
    return cmd


def plan(catalog: Catalog, text: str) -> Any:
    return catalog.plan(run_command(text))


def refusal(catalog: Catalog, text: str) -> str:
    with pytest.raises(PlanError) as info:
        plan(catalog, text)
    return str(info.value)


@pytest.mark.parametrize("recipe", ALIGN_RECIPES)
def test_each_tiny_recipe_compiles_to_its_trainer_with_the_trainers_own_flags(catalog: Catalog, recipe: str) -> None:
    """The compiled command is what `python -m trainer --trainer X` parses (every flag one its config has)."""
    from trainer.config import parse_args

    compiled = plan(catalog, f"run recipe={recipe}")
    kind = recipe.removesuffix("-tiny")
    assert compiled.component == f"trl-{kind}"
    container = compiled.operation["component"]["run"]["container"]
    assert container["env"] == [{"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}]
    args = [render(arg, compiled.params) for arg in container["args"]]
    assert args[0] == f"--trainer={kind}"
    script, training, _, evaluation = parse_args([*args, "--output_dir=/tmp/unused"])
    assert script.trainer == kind and evaluation.eval_procedure_version == TRAINER_KINDS[kind].procedure
    assert training.max_steps == compiled.params["max_steps"]
    if TRAINER_KINDS[kind].takes_rewards:
        assert script.reward_funcs == "format,length,exact-match"


def render(arg: str, params: dict[str, Any]) -> str:
    """A component arg with its `{{ name }}` filled in as Polyaxon renders it (booleans as True/False)."""
    for name, value in params.items():
        arg = arg.replace("{{ " + name + " }}", str(value))
    assert "{{" not in arg, arg
    return arg


def test_a_key_the_trainer_lacks_is_refused_with_the_closest_names(fresh_dir: Path) -> None:
    dpo = (fresh_dir / "recipes" / "dpo-tiny.yaml").read_text()
    write(fresh_dir, "recipes/dpo-tiny.yaml", dpo.replace("  beta: 0.1\n", "  beta: 0.1\n  num_generation: 4\n"))
    with pytest.raises(CatalogError) as info:
        Catalog.load(fresh_dir)
    assert "defaults.num_generation: not an input of component trl-dpo" in str(info.value)


RECIPE_ERRORS = [
    ("trainer: dpo\ncomponent: trl-sft\n", "trainer: dpo, but component trl-sft runs the sft trainer"),
    ("component: trl-dpo\ndataset: {name: tiny-chat}\n", "dataset: DPO needs preference (prompt, chosen, rejected)"),
    ("component: trl-dpo\ndataset: {name: tiny-chatt}\n", "dataset.name: no dataset 'tiny-chatt'; did you mean"),
    (
        "component: trl-dpo\ndataset: {name: tiny-prefs}\neval: {metrics: [eval_loss], procedure_version: v1}\n",
        "eval: the dpo trainer evaluates with procedure pref-v1, not v1",
    ),
    (
        "component: trl-grpo\ndataset: {name: tiny-prompts}\nrewards: [format]\n"
        "eval: {metrics: [eval_mean_reward, eval_reward_length], procedure_version: gen-v1}\n",
        "eval: procedure gen-v1 does not write eval_reward_length",
    ),
    ("component: trl-grpo\ndataset: {name: tiny-prompts}\n", "rewards: a grpo recipe names its default reward"),
    ("component: trl-grpo\ndataset: {name: tiny-prefs}\nrewards: [format]\n", "GRPO needs prompt_only (prompt)"),
    (
        "component: trl-rloo\ndataset: {name: tiny-chat}\nrewards: [exact-match]\n",
        "RLOO needs prompt_only (prompt); dataset tiny-chat is conversational language_modeling",
    ),
    ("component: trl-sft\nrewards: [format]\n", "rewards: only GRPO and RLOO recipes take reward functions"),
    ("component: trl-dpo\ndatasets: [tiny-prefz]\n", "datasets: no dataset 'tiny-prefz'"),
]


@pytest.mark.parametrize(("body", "message"), RECIPE_ERRORS)
def test_a_recipe_whose_trainer_data_rewards_or_contract_disagree_is_refused(
    fresh_dir: Path, body: str, message: str
) -> None:
    write(fresh_dir, "recipes/bad.yaml", "name: bad\ndescription: x\n" + body)
    with pytest.raises(CatalogError) as info:
        Catalog.load(fresh_dir)
    assert message in str(info.value), str(info.value)
    assert check_catalog(fresh_dir) == [str(info.value)]


def test_a_dataset_declared_in_a_format_its_recipes_trainer_does_not_take_is_refused(fresh_dir: Path) -> None:
    # A manifest that contradicts itself is the catalog's error at load (bad rows are the data's: tests/bot/catalog/
    # test_rows.py); the rows' own format is named beside it.
    entry = fresh_dir / "datasets" / "tiny-prefs.yaml"
    write(fresh_dir, "datasets/tiny-prefs.yaml", entry.read_text().replace("format: preference", "format: prompt_only"))
    with pytest.raises(CatalogError) as info:
        Catalog.load(fresh_dir)
    assert str(info.value).startswith("recipes/dpo-tiny.yaml: dataset: DPO needs preference (prompt, chosen, ")
    assert "dataset tiny-prefs is prompt_only (prompt) with columns chosen, prompt, rejected" in str(info.value)


def test_a_run_chooses_a_catalog_dataset_by_name_where_the_recipe_lets_it(fresh_dir: Path) -> None:
    for name in ("tiny-prefs", "tiny-kto"):  # a second dataset of each format
        shutil.copytree(fresh_dir.parent / "manifests" / "datasets" / name, fresh_dir / "datasets" / f"{name}-b")
        entry = (fresh_dir / "datasets" / f"{name}.yaml").read_text().replace(f"datasets/{name}", f"datasets/{name}-b")
        write(fresh_dir, f"datasets/{name}-b.yaml", entry.replace(f"name: {name}", f"name: {name}-b"))
    catalog = Catalog.load(fresh_dir)
    default, chosen = plan(catalog, "run recipe=dpo-tiny"), plan(catalog, "run recipe=dpo-tiny dataset=tiny-prefs-b")
    assert chosen.params["dataset_name"] == "manifests/datasets/tiny-prefs-b"
    assert chosen.provenance["dataset_name"] == "command line: dataset=tiny-prefs-b"
    assert chosen.params["eval_dataset_name"] == "manifests/datasets/tiny-prefs-b"  # its own held-out split
    assert chosen.eval_contract_hash != default.eval_contract_hash  # not compared with the default's runs
    assert "does not let runs choose dataset tiny-kto-b" in refusal(catalog, "run recipe=kto-tiny dataset=tiny-kto-b")


def test_a_chosen_dataset_must_have_the_recipes_splits(catalog: Catalog) -> None:
    refused = refusal(catalog, "run recipe=dpo-tiny dataset=ultrafeedback-binarized")
    assert "dataset ultrafeedback-binarized has no split 'train' (splits: train_prefs, test_prefs, " in refused
    assert "recipe dpo-tiny trains on 'train' and evaluates on 'eval'" in refused


def test_dataset_and_rewards_on_the_command_line(catalog: Catalog) -> None:
    assert "DPO needs preference" in refusal(catalog, "run recipe=dpo-tiny dataset=tiny-chat")
    assert "never by path or URL" in refusal(catalog, "run recipe=dpo-tiny dataset=https://x.org/data.jsonl")
    assert "KTO needs unpaired_preference" in refusal(catalog, "run recipe=kto-tiny dataset=tiny-prefs")
    grpo = plan(catalog, "run recipe=grpo-tiny rewards=length,format")
    assert grpo.params["reward_funcs"] == "length,format" and grpo.provenance["reward_funcs"] == "command line"
    assert plan(catalog, "run recipe=grpo-tiny").provenance["reward_funcs"] == "recipe recipes/grpo-tiny.yaml"
    assert "did you mean length?; known: format, length, exact-match" in refusal(
        catalog, "run recipe=grpo-tiny rewards=lenght"
    )
    assert "names a reward function twice" in refusal(catalog, "run recipe=grpo-tiny rewards=format,format")
    assert "rewards= is for GRPO and RLOO" in refusal(catalog, "run recipe=dpo-tiny rewards=format")
    # The contract names eval_reward_exact_match only when the run uses that function.
    assert "eval_mean_reward" in plan(catalog, "run recipe=grpo-tiny rewards=format").eval_contract["metrics"]


def test_the_trainer_tables_agree_with_the_trainers() -> None:
    """What the catalog knows of procedures, formats and reward functions is what the trainer does."""
    from trainer import rewards
    from trainer.evaluation import PROCEDURE_METRICS
    from trainer.trainers import TRAINERS

    generated = tuple(rewards.metric_name(name) for name in rewards.REGISTRY)
    assert {p: tuple(m for m in ms if m not in generated) for p, ms in PROCEDURE_METRICS.items()} == PROCEDURES
    assert [reward_metric(name) for name in rewards.REGISTRY] == list(generated)
    assert {name: spec.procedure for name, spec in TRAINERS.items()} == {
        name: kind.procedure for name, kind in TRAINER_KINDS.items()
    }
    assert {name: spec.takes_reward_funcs for name, spec in TRAINERS.items()} == {
        name: kind.takes_rewards for name, kind in TRAINER_KINDS.items()
    }


def test_the_catalogs_reward_functions_are_the_trainers(catalog: Catalog) -> None:
    from trainer import rewards

    assert list(catalog.rewards) == list(rewards.REGISTRY)
    assert {name: f.reads for name, f in catalog.rewards.items()} == rewards.COLUMNS


def test_every_trl_component_is_tagged_with_its_trainer(catalog: Catalog) -> None:
    found = {name: component_trainer(c) for name, c in catalog.components.items() if name.startswith("trl-")}
    assert {name: kind.name for name, kind in found.items() if kind is not None} == {
        "trl-sft": "sft",
        "trl-sft-distributed": "sft",
        "trl-preflight": "sft",
        "trl-preflight-distributed": "sft",
        "trl-dpo": "dpo",
        "trl-kto": "kto",
        "trl-reward": "reward",
        "trl-grpo": "grpo",
        "trl-rloo": "rloo",
    }


def test_memory_counts_a_reference_model_two_sequences_and_generations(catalog: Catalog) -> None:
    full = plan(catalog, "run recipe=dpo-tiny").memory
    precomputed = plan(catalog, "run recipe=dpo-tiny precompute_ref_log_probs=true").memory
    assert full.reference_bytes == full.weights_bytes > 0 and "reference model" in full.summary()
    assert precomputed.reference_bytes == 0 and "reference model" not in precomputed.summary()
    grpo = plan(catalog, "run recipe=grpo-tiny").memory
    longer = plan(catalog, "run recipe=grpo-tiny max_completion_length=64").memory
    assert 0 < grpo.generation_bytes < longer.generation_bytes and grpo.reference_bytes == 0
    assert plan(catalog, "run recipe=grpo-tiny beta=0.1").memory.reference_bytes > 0
    sft = plan(catalog, "run recipe=sft-tiny").memory
    assert sft.reference_bytes == 0 and sft.generation_bytes == 0 and "generation" not in sft.summary()


def test_vllm_is_a_generation_preset_and_colocate_reserves_its_share(catalog: Catalog) -> None:
    base = plan(catalog, "run recipe=grpo-qwen-0p5b-lora").memory
    colocated = plan(catalog, "run recipe=grpo-qwen-0p5b-lora preset=gpu-1x,vllm-colocate")
    served = plan(catalog, "run recipe=grpo-qwen-0p5b-lora preset=gpu-1x,vllm-server")
    assert colocated.params["use_vllm"] is True and colocated.params["vllm_mode"] == "colocate"
    assert colocated.memory.generation_bytes - base.generation_bytes == int(0.3 * 80 * 1024**3)
    assert served.params["vllm_mode"] == "server" and served.memory.generation_bytes == base.generation_bytes
    sidecars = served.operation["runPatch"]["sidecars"]
    assert sidecars[0]["command"] == ["trl", "vllm-serve"]
    assert "both set generation: give one generation preset" in refusal(
        catalog, "run recipe=grpo-qwen-0p5b-lora preset=vllm-colocate,vllm-server"
    )


def test_the_gate_key_keeps_sft_runs_keys_and_covers_the_trainers_memory() -> None:
    from bot.catalog.gate import gate_key

    sft = gate_key("r", {}, [], {"per_device_train_batch_size": 8})
    assert sft == gate_key("r", {}, [], {"per_device_train_batch_size": 8, "learning_rate": 1.0})
    dpo = gate_key("r", {}, [], {"per_device_train_batch_size": 8, "beta": 0.1})
    assert dpo != sft and dpo != gate_key("r", {}, [], {"per_device_train_batch_size": 8, "beta": 0.2})


def test_a_grpo_batch_must_hold_whole_groups_of_completions(catalog: Catalog) -> None:
    refused = refusal(catalog, "run recipe=grpo-tiny batch_size=3")
    assert "GRPO generates num_generations=2 completions of each prompt" in refused
    assert "must hold whole groups: a multiple of 2, e.g. batch_size=4" in refused
    assert "2..16" in refusal(catalog, "run recipe=rloo-tiny num_generations=1")  # the recipe's bounds first
    assert plan(catalog, "run recipe=grpo-tiny batch_size=6 num_generations=3").params["num_generations"] == 3


def test_a_chained_run_starts_from_its_bases_model_copied_in_and_pinned_by_digest(catalog: Catalog) -> None:
    from bot.catalog.choices import ChainBase

    model_pin = plan(catalog, "run recipe=sft-tiny").pins["model"]
    base = ChainBase(
        run_name="sft-tiny-0123456789", run_uuid="u" * 32, model_digest="sha256:" + "a" * 64, model_pin=model_pin
    )
    chained = catalog.plan(run_command("run recipe=dpo-tiny base=sft-tiny-0123456789"), base=base)
    assert chained.params["model_name_or_path"] == "outputs/model" and chained.params["base_run"] == "u" * 32
    assert chained.params["base_model_digest"] == base.model_digest
    assert chained.provenance["base_run"].startswith("command line: base=sft-tiny-0123456789")
    assert chained.pins["model"] == model_pin and chained.pins["base"] == f"sft-tiny-0123456789@{base.model_digest}"
    init = chained.operation["runPatch"]["init"]
    assert init == [{"artifacts": {"dirs": [f"{'u' * 32}/outputs/model"]}}]
    other = ChainBase(run_name="q", run_uuid="v" * 32, model_digest="sha256:" + "b" * 64, model_pin="other@sha256:1")
    with pytest.raises(PlanError, match="base=q trained other@sha256:1; recipe dpo-tiny starts from"):
        catalog.plan(run_command("run recipe=dpo-tiny base=q"), base=other)
    assert "does not train a TRL model" in refusal(catalog, "run recipe=quickstart base=q")
    with pytest.raises(PlanError, match="only `/finetune run` starts from another run's model"):
        plan(catalog, "run recipe=dpo-tiny base=q")
    sweep = parse_command("sweep recipe=dpo-tiny lr=1e-3,2e-3 base=q")
    assert isinstance(sweep, SweepCommand)
    with pytest.raises(PlanError, match="recipe dpo-tiny has no key 'base'"):  # a sweep trains the recipe's model
        catalog.plan_sweep(sweep)


def test_a_grpo_sweep_checks_every_trials_groups_before_it_starts(catalog: Catalog) -> None:
    def sweep(text: str) -> Any:
        cmd = parse_command(text)
        assert isinstance(cmd, SweepCommand)
        return catalog.plan_sweep(cmd)

    assert sweep("sweep recipe=grpo-tiny batch_size=2,4,6 --dry-run").trials == 3
    with pytest.raises(PlanError, match="the trial with per_device_train_batch_size=3: GRPO generates"):
        sweep("sweep recipe=grpo-tiny batch_size=3,4")
    with pytest.raises(PlanError, match=r"num_generations is int 2\.\.16, and uniform samples real numbers"):
        sweep("sweep recipe=grpo-tiny num_generations=uniform(2,8) mode=random trials=3")
    assert sweep("sweep recipe=dpo-tiny batch_size=3,5 --dry-run").trials == 2  # DPO has no groups
