"""Estimates and cost profiles, without Slack or Polyaxon: measured, bounded, priced, multiplied by trials."""

from __future__ import annotations

import pytest

from bot.catalog import Catalog, CostProfile
from bot.grammar import BudgetCommand, CommandError, UsageCommand, parse_command
from bot.usage.estimate import Sample, Work, estimate, work_units
from tests.fixtures.slack import load_catalog


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """The shipped catalog."""
    return load_catalog()  # type: ignore[no-any-return]


def test_presets_say_what_a_run_holds_and_costs(catalog: Catalog) -> None:
    gpu = catalog.plan(parse_command("run recipe=sft-llama31-8b-lora"), require_local=False).cost
    assert gpu is not None and (gpu.unit, gpu.count, gpu.price) == ("accelerator", 1.0, 2.4)
    assert gpu.price_source == "pricing.yaml (gpu-1x)" and gpu.max_duration_s == 24 * 3600
    ddp = catalog.plan(parse_command("run recipe=sft-qwen-1p5b-ddp"), require_local=False).cost
    assert ddp is not None and ddp.count == 16  # 8 per replica × 2 replicas
    cpu = catalog.plan(parse_command("run recipe=quickstart"), require_local=False).cost
    assert cpu is not None and (cpu.unit, cpu.count, cpu.price) == ("core", 1.0, None)


def test_measured_beats_the_bound_and_a_sweep_multiplies() -> None:
    cost = CostProfile(unit="accelerator", count=8, price=2.0, max_duration_s=7200, max_duration_source="preset x")
    bound = estimate(cost, {"max_steps": 100}, None, presets="`x`")
    assert bound is not None and not bound.measured and bound.hours == 16.0 and bound.money == "32.00 USD"
    assert "at most: 2 h (preset x)" in bound.line()
    sample = Sample(run_name="r1", unit="steps", units=50, running_s=900)  # 18 s per step
    measured = estimate(cost, {"max_steps": 100}, sample, presets="`x`", trials=3)
    assert measured is not None and measured.measured and measured.hours == pytest.approx(3 * 8 * 1800 / 3600)
    assert "for 3 trials" in measured.line() and "100 steps × 18 s per step on `r1`" in measured.line()
    assert estimate(cost.model_copy(update={"max_duration_s": None}), {}, None, presets="`x`") is None
    assert work_units({"max_steps": -1, "num_train_epochs": 2.0}) == ("epochs", 2.0)


def test_a_first_run_is_estimated_from_its_work_not_from_the_presets_maximum(catalog: Catalog) -> None:
    # Issue 51: the first gpu-1x run of any recipe was 24.0 accelerator-hours (maxDuration), even for 10 steps.
    plan = catalog.plan(parse_command("run recipe=sft-qwen-0p5b-lora max_steps=10"), require_local=False)
    assert plan.cost is not None and plan.memory is not None and plan.cost.max_duration_s == 24 * 3600
    work = Work(parameters=plan.memory.parameters, trainable=plan.memory.trainable_parameters)
    guess = estimate(plan.cost, plan.params, None, presets="`gpu-1x`", work=work)
    assert guess is not None and not guess.measured
    # 10 steps × 8 rows × 4 accumulated × 2,048 tokens × (4 × 494M + 2 × 8.8M) FLOP ÷ (312 TFLOP/s × 35 %).
    tokens = 10 * 8 * 4 * 2048
    flops = tokens * (4 * plan.memory.parameters + 2 * plan.memory.trainable_parameters)
    assert guess.wall_s == pytest.approx(flops / (312e12 * 0.35))
    assert guess.hours < 0.01
    line = guess.line()
    assert "FLOP model: 10 steps × 8 rows × 4 accumulated" in line and "35% assumed utilisation" in line, line
    assert "NVIDIA-A100-SXM4-80GB" in line and "no confirmed run on `gpu-1x` measured yet" in line


def test_the_flop_model_reads_epochs_by_the_dataset_s_rows_and_cpu_by_its_measured_rate() -> None:
    cost = CostProfile(
        unit="core", count=2, max_duration_s=60, max_duration_source="preset y", flops_per_s=50e9,
        flops_source="50 GFLOP/s per core (measured)",
    )  # fmt: skip
    work = Work(parameters=1_000_000, trainable=1_000_000, rows=1000, row_bytes=400.0)
    guess = estimate(cost, {"num_train_epochs": 2, "max_length": 512}, None, presets="`y`", work=work)
    assert guess is not None
    assert guess.wall_s == pytest.approx(2 * 1000 * 100 * 6e6 / (50e9 * 2))  # ~100 tokens a row (400 bytes / 4)
    assert "2 epochs × 1,000 rows × ~100 tokens a row" in guess.line()
    # Past the preset's limit a run is ended: the estimate holds no more than that, and says so.
    long = estimate(cost, {"num_train_epochs": 2000, "max_length": 512}, None, presets="`y`", work=work)
    assert long is not None and long.wall_s == 60 and "bounded by preset y" in long.line()
    # A measured run of the recipe wins; without the model's size the presets' maximum is what is left.
    sample = Sample(run_name="r2", unit="epochs", units=1, running_s=3.0)
    assert estimate(cost, {"num_train_epochs": 2}, sample, presets="`y`", work=work).measured  # type: ignore[union-attr]
    bounded = estimate(cost, {"num_train_epochs": 2}, None, presets="`y`", work=Work())
    assert bounded is not None and "at most: 1 min" in bounded.line()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("usage", UsageCommand()),
        ("usage period=month by=recipe", UsageCommand(period="month", by="recipe")),
        ("budget", BudgetCommand()),
        ("budget set 200 per=week", BudgetCommand(action="set", hours=200, period="week")),
        ("budget set 12.5h per=Month", BudgetCommand(action="set", hours=12.5, period="month")),
        ("budget off", BudgetCommand(action="off")),
    ],
    ids=["usage", "usage-month-recipe", "budget", "set", "set-hours-suffix", "off"],
)
def test_usage_and_budget_parse(text: str, expected: object) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("usage by=team", "by='team' is not one of user, recipe, preset"),
        ("usage period=weak", "did you mean week"),
        ("budget set -5 per=week", "between 0 and"),
        ("budget set 10", "needs per=week or per=month"),
        ("budget sett 10 per=week", "did you mean set"),
    ],
    ids=["by", "period", "negative", "no-period", "typo"],
)
def test_bad_usage_and_budget_are_refused_with_what_is_right(text: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
