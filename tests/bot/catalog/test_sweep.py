"""Compiling a sweep: the space checked against the recipe, one matrix operation, the seed and the early stop."""

from __future__ import annotations

import math

import pytest

from bot.catalog import Catalog, PlanError
from bot.catalog.sweep import SweepPlan, SweptKey, compile_matrix, derived_seed, plan_sweep
from bot.grammar import SweepCommand, parse_command
from tests.bot.catalog.planning import plan as run_plan


def command(text: str) -> SweepCommand:
    """Parse one `sweep` command line."""
    parsed = parse_command(text)
    assert isinstance(parsed, SweepCommand)
    return parsed


def plan(catalog: Catalog, text: str) -> SweepPlan:
    """Parse and plan one `sweep` command line."""
    return catalog.plan_sweep(command(text))


def test_a_quickstart_grid_compiles_to_one_uncached_matrix_operation(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=0.01,0.05,0.1")
    assert result.plan.kind == "sweep"
    assert result.mode == "grid" and result.trials == 3 and result.concurrency == 3 and result.seed is None
    assert "lr" not in result.plan.operation["params"]
    assert "epochs" in result.plan.operation["params"]
    assert "lr" not in result.plan.params
    assert result.plan.provenance["lr"] == "swept: lr ∈ {0.01, 0.05, 0.1}"
    assert result.plan.operation["matrix"] == {
        "kind": "grid",
        "concurrency": 3,
        "numRuns": 3,
        "params": {"lr": {"kind": "choice", "value": [0.01, 0.05, 0.1]}},
    }
    assert result.matrix == result.plan.operation["matrix"]
    assert result.plan.operation["cache"] == {"disable": True}
    assert result.metric == "accuracy" and result.higher is True and result.target is None
    assert result.space == [SweptKey(key="lr", input="lr", kind="choice", values=[0.01, 0.05, 0.1])]
    assert result.plan.tags[-1] == "sweep:grid"


def test_the_fixed_part_compiles_as_run_would(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=0.1,0.2 epochs=3 --dry-run")
    assert result.plan.operation["params"]["epochs"] == {"value": 3}
    assert result.plan.params["epochs"] == 3 and result.plan.provenance["epochs"] == "command line"
    assert result.plan.dry_run is True


def test_listed_values_are_typed_by_the_override(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=1,0.5")
    values = result.plan.operation["matrix"]["params"]["lr"]["value"]
    assert values == [1.0, 0.5]
    assert [type(v) for v in values] == [float, float]


def test_a_swept_key_is_compiled_under_the_input_it_sets(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=sft-tiny lr=1e-3,3e-3 scheduler=linear,cosine")
    params = result.plan.operation["matrix"]["params"]
    assert params == {
        "learning_rate": {"kind": "choice", "value": [1e-3, 3e-3]},
        "lr_scheduler_type": {"kind": "choice", "value": ["linear", "cosine"]},
    }
    assert "learning_rate" not in result.plan.operation["params"]
    assert "lr_scheduler_type" not in result.plan.operation["params"]
    assert result.metric == "eval_loss" and result.higher is False
    assert result.trials == 4


def test_a_swept_memory_param_is_estimated_at_its_heaviest_value(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=sft-tiny batch_size=2,8,4")
    heaviest = run_plan(catalog, "run recipe=sft-tiny batch_size=8")
    lightest = run_plan(catalog, "run recipe=sft-tiny batch_size=2")
    assert result.plan.memory is not None and heaviest.memory is not None and lightest.memory is not None
    assert heaviest.memory != lightest.memory
    assert result.plan.memory == heaviest.memory
    assert "per_device_train_batch_size" not in result.plan.operation["params"]


BAD_SWEEPS = [
    ("sweep recipe=quickstart lr=0.5,2", "lr=2 (in the sweep): 2 is out of bounds: float in (0, 1]"),
    ("sweep recipe=quickstart lr=0,0.5", "0 is out of bounds: float in (0, 1]"),
    ("sweep recipe=quickstart lr=uniform(0.5,2) trials=3", "2 is out of bounds: float in (0, 1]"),
    ("sweep recipe=quickstart hidden=1,8", "1 is out of bounds: int 2..1024"),
    ("sweep recipe=quickstart epochs=1.5,2", "epochs is an int: write a whole number, not 1.5"),
    (
        "sweep recipe=quickstart epochs=uniform(1,5) trials=3",
        "epochs is int 1..50, and uniform samples real numbers; list its values instead",
    ),
    ("sweep recipe=quickstart hidden=loguniform(2,64) trials=3", "list its values instead"),
    ("sweep recipe=quickstart lrr=0.1,0.2", "recipe quickstart has no key 'lrr'; did you mean lr?"),
    ("sweep recipe=quickstart lr=0.1,0.2 epochz=3", "has no key 'epochz'; did you mean epochs?"),
    ("sweep recipe=quickstart lr=0.1,0.2 preset=gpu-9x", "no preset 'gpu-9x'"),
    ("sweep recipe=quickstartt lr=0.1,0.2", "no recipe 'quickstartt'; did you mean quickstart"),
    ("sweep recipe=sft-tiny lr=1e-3,2e-3 learning_rate=3e-3", "lr is swept and also fixed by learning_rate"),
    ("sweep recipe=sft-tiny lr=1e-3,2e-3 learning_rate=3e-3,4e-3", "lr and learning_rate both set learning_rate"),
    ("sweep recipe=sft-tiny scheduler=cosine,cosin", "did you mean cosine?"),
    ("sweep recipe=quickstart lr=1,1.0", "lr=1,1.0: two values are the same once typed (float in (0, 1])"),
]


@pytest.mark.parametrize(
    ("text", "message"), BAD_SWEEPS, ids=[f"{i}-{c[1][:32]}".replace(" ", "-") for i, c in enumerate(BAD_SWEEPS)]
)
def test_sweeps_that_do_not_fit_the_recipe_are_refused(catalog: Catalog, text: str, message: str) -> None:
    with pytest.raises(PlanError) as info:
        plan(catalog, text)
    assert message in str(info.value)


def test_an_unknown_swept_key_suggests_the_closest(catalog: Catalog) -> None:
    with pytest.raises(PlanError) as info:
        plan(catalog, "sweep recipe=quickstart lrr=0.1,0.2")
    assert info.value.suggestions[:1] == ["lr"]


def test_loguniform_bounds_are_natural_logs(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=loguniform(0.001,0.1) trials=5")
    spec = result.plan.operation["matrix"]["params"]["lr"]
    assert spec["kind"] == "loguniform"
    assert spec["value"] == pytest.approx([math.log(0.001), math.log(0.1)])
    assert result.mode == "random" and result.plan.operation["matrix"]["kind"] == "random"
    assert result.plan.operation["matrix"]["numRuns"] == 5
    assert result.plan.provenance["lr"] == "swept: lr ~ loguniform(0.001, 0.1)"
    # The space keeps what the user wrote: only the matrix speaks Polyaxon's log scale.
    assert result.space[0].low == 0.001 and result.space[0].high == 0.1


def test_uniform_bounds_are_the_values_themselves(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=uniform(0.01,0.5) trials=4")
    assert result.plan.operation["matrix"]["params"]["lr"] == {"kind": "uniform", "value": [0.01, 0.5]}


def test_a_random_sweep_without_a_seed_gets_a_deterministic_one(catalog: Catalog) -> None:
    text = "sweep recipe=quickstart lr=loguniform(0.001,0.1) trials=5"
    first, second = plan(catalog, text), plan(catalog, text)
    assert first.seed is not None and first.seed == second.seed
    assert first.plan.operation["matrix"]["seed"] == first.seed == derived_seed(command(text))
    other = plan(catalog, "sweep recipe=quickstart lr=loguniform(0.001,0.2) trials=5")
    assert other.seed is not None and other.seed != first.seed


def test_a_random_sweep_keeps_the_users_seed(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=loguniform(0.001,0.1) trials=5 sampler_seed=7")
    assert result.seed == 7 and result.plan.operation["matrix"]["seed"] == 7


def test_a_grid_has_no_seed(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=0.1,0.2")
    assert result.seed is None and "seed" not in result.plan.operation["matrix"]


@pytest.mark.parametrize(
    ("base", "changed"),
    [
        (
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4",
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=5",
        ),
        (
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4",
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4 epochs=2",
        ),
        (
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4",
            "sweep recipe=quickstart lr=loguniform(0.1,0.5) trials=4",
        ),
        (
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4",
            "sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4 preset=cpu-small",
        ),
        (
            "sweep recipe=quickstart lr=0.1,0.2 mode=random trials=2",
            "sweep recipe=sft-tiny lr=0.1,0.2 mode=random trials=2",
        ),
    ],
    ids=["trials", "fixed-key", "space-kind", "presets", "recipe"],
)
def test_the_derived_seed_follows_what_the_command_asks(base: str, changed: str) -> None:
    assert derived_seed(command(base)) != derived_seed(command(changed))


def test_the_derived_seed_ignores_concurrency_and_dry_run() -> None:
    base = derived_seed(command("sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4"))
    assert derived_seed(command("sweep recipe=quickstart lr=uniform(0.1,0.5) trials=4 concurrency=1 --dry-run")) == base
    assert 0 <= base < 2**31 - 1


GRID_PARAMS = {"lr": {"kind": "choice", "value": [0.1, 0.2]}, "hidden": {"kind": "choice", "value": [8, 16]}}


@pytest.mark.parametrize(
    ("mode", "seed", "expected"),
    [
        ("grid", None, {"kind": "grid", "concurrency": 2, "numRuns": 4, "params": GRID_PARAMS}),
        ("grid", 9, {"kind": "grid", "concurrency": 2, "numRuns": 4, "params": GRID_PARAMS}),
        ("random", 9, {"kind": "random", "concurrency": 2, "numRuns": 4, "params": GRID_PARAMS, "seed": 9}),
    ],
    ids=["grid", "grid-ignores-a-seed", "random-with-seed"],
)
def test_compile_matrix(mode: str, seed: int | None, expected: dict[str, object]) -> None:
    space = [
        SweptKey(key="lr", input="lr", kind="choice", values=[0.1, 0.2]),
        SweptKey(key="hidden", input="hidden", kind="choice", values=[8, 16]),
    ]
    assert compile_matrix(mode, space, trials=4, concurrency=2, seed=seed) == expected


def test_compile_matrix_ranges() -> None:
    space = [
        SweptKey(key="lr", input="learning_rate", kind="loguniform", low=1e-4, high=1e-2),
        SweptKey(key="warmup_ratio", input="warmup_steps", kind="uniform", low=0.0, high=0.2),
    ]
    matrix = compile_matrix("random", space, trials=8, concurrency=4, seed=1)
    assert matrix["params"]["learning_rate"]["kind"] == "loguniform"
    assert matrix["params"]["learning_rate"]["value"] == pytest.approx([math.log(1e-4), math.log(1e-2)])
    assert matrix["params"]["warmup_steps"] == {"kind": "uniform", "value": [0.0, 0.2]}
    assert (matrix["numRuns"], matrix["concurrency"], matrix["seed"]) == (8, 4, 1)


def test_a_recipe_without_an_eval_contract_is_refused(catalog: Catalog) -> None:
    quickstart = catalog.recipes["quickstart"]
    recipe = quickstart.model_copy(update={"spec": quickstart.spec.model_copy(update={"eval": None})})
    component = catalog.components[recipe.spec.component]
    with pytest.raises(PlanError) as info:
        plan_sweep(command("sweep recipe=quickstart lr=0.1,0.2"), recipe, component, catalog.plan)
    assert "declares no eval contract" in str(info.value) and "quickstart" in str(info.value)


def test_a_recipe_target_stops_the_sweep_early(catalog: Catalog) -> None:
    quickstart = catalog.recipes["quickstart"]
    assert quickstart.spec.eval is not None
    eval_spec = quickstart.spec.eval.model_copy(update={"target": 0.9})
    recipe = quickstart.model_copy(update={"spec": quickstart.spec.model_copy(update={"eval": eval_spec})})
    component = catalog.components[recipe.spec.component]
    result = plan_sweep(command("sweep recipe=quickstart lr=0.1,0.2"), recipe, component, catalog.plan)
    assert result.target == 0.9
    assert result.plan.operation["matrix"]["earlyStopping"] == [
        {"kind": "metric_early_stopping", "metric": "accuracy", "value": 0.9, "optimization": "maximize"}
    ]


def test_without_a_target_there_is_no_early_stopping(catalog: Catalog) -> None:
    result = plan(catalog, "sweep recipe=quickstart lr=0.1,0.2")
    assert "earlyStopping" not in result.plan.operation["matrix"]


def test_a_loss_target_minimizes(catalog: Catalog) -> None:
    tiny = catalog.recipes["sft-tiny"]
    assert tiny.spec.eval is not None
    eval_spec = tiny.spec.eval.model_copy(update={"target": 2.5})
    recipe = tiny.model_copy(update={"spec": tiny.spec.model_copy(update={"eval": eval_spec})})
    component = catalog.components[recipe.spec.component]
    result = plan_sweep(command("sweep recipe=sft-tiny lr=1e-3,2e-3"), recipe, component, catalog.plan)
    assert result.plan.operation["matrix"]["earlyStopping"] == [
        {"kind": "metric_early_stopping", "metric": "eval_loss", "value": 2.5, "optimization": "minimize"}
    ]


# --- a range between whole numbers without trials=N: the key's type is told first --------------------------


def refused(catalog: Catalog, text: str) -> str:
    with pytest.raises(PlanError) as error:
        plan(catalog, text)
    return str(error.value)


def test_a_range_over_an_int_key_is_refused_for_its_type_before_trials_is_asked(catalog: Catalog) -> None:
    told = refused(catalog, "sweep recipe=quickstart epochs=uniform(1,5)")
    assert told == (
        "epochs=uniform(1,5): epochs is int 1..50, and uniform samples real numbers; list its values instead: "
        "epochs=1,2,3,4,5 (a grid: every value, no trials=N needed) or epochs=choice(1,2,3,4,5) mode=random trials=N"
    )
    assert "trials=N (how many" not in told  # the missing sample size is not the problem to fix first


def test_a_range_of_whole_numbers_over_a_float_key_is_judged_on_its_bounds_then_asked_its_trials(
    catalog: Catalog,
) -> None:
    assert refused(catalog, "sweep recipe=quickstart lr=uniform(1,5)") == (
        "lr=5 (in the sweep): 5 is out of bounds: float in (0, 1]"
    )
    assert refused(catalog, "sweep recipe=sft-tiny max_steps=5,10 lr=uniform(0,1)").startswith("lr=0 (in the sweep)")
    # Bounds that hold: only the sample size is missing, asked once the axes are judged.
    told = refused(catalog, "sweep recipe=grpo-qwen-0p5b-lora temperature=uniform(1,2)")
    assert told == "a random sweep needs trials=N (how many points to sample), e.g. trials=8", told


def test_a_range_of_real_numbers_is_asked_its_trials_by_the_grammar() -> None:
    from bot.grammar import CommandError

    with pytest.raises(CommandError) as error:
        parse_command("sweep recipe=quickstart lr=uniform(0.01,0.5)")
    assert error.value.message == "a random sweep needs trials=N (how many points to sample), e.g. trials=8"
    assert command("sweep recipe=quickstart epochs=1,2,3,4,5").trials == 5  # listed: a grid, no trials=N
