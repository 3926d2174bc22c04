"""Estimates and cost profiles, without Slack or Polyaxon: measured, bounded, priced, multiplied by trials."""

from __future__ import annotations

import pytest

from bot.catalog import Catalog, CostProfile
from bot.grammar import BudgetCommand, CommandError, UsageCommand, parse_command
from bot.usage.estimate import Sample, estimate, work_units
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
