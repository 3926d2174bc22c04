"""`sweep`: a space of values over a recipe's training keys, its mode, trial count and concurrency; `compare top=N`."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, CompareCommand, SweepAxis, SweepCommand, parse_command
from bot.grammar.sweep import DEFAULT_CONCURRENCY, MAX_TRIALS, parse_axis


def sweep(text: str) -> SweepCommand:
    """Parse one `sweep` command line."""
    command = parse_command(text)
    assert isinstance(command, SweepCommand)
    return command


def test_a_listed_grid_runs_every_combination_with_the_default_concurrency() -> None:
    command = sweep("sweep recipe=quickstart lr=0.01,0.05,0.1")
    assert command.mode == "grid" and command.trials == 3 and command.grid_size == 3
    assert command.concurrency == min(DEFAULT_CONCURRENCY, 3)
    assert command.space == {
        "lr": SweepAxis(kind="choice", values=[0.01, 0.05, 0.1], texts=["0.01", "0.05", "0.1"]),
    }
    assert command.overrides == {} and command.sampler_seed is None and command.dry_run is False
    assert command.notes == []


def test_a_grid_larger_than_the_default_concurrency_runs_four_at_a_time() -> None:
    command = sweep("sweep recipe=quickstart lr=0.1,0.2,0.3 hidden=8,16")
    assert command.mode == "grid" and command.trials == 6 and command.grid_size == 6
    assert command.concurrency == DEFAULT_CONCURRENCY == 4


def test_choice_lists_values_like_a_comma_list() -> None:
    command = sweep("sweep recipe=quickstart hidden=choice(8,16,32)")
    assert command.space["hidden"].kind == "choice"
    assert command.space["hidden"].values == [8, 16, 32]
    assert all(type(value) is int for value in command.space["hidden"].values)
    assert command.mode == "grid" and command.trials == 3


@pytest.mark.parametrize(
    ("text", "kind", "low", "high"),
    [
        ("sweep recipe=quickstart lr=uniform(0.01,0.5) trials=6", "uniform", 0.01, 0.5),
        ("sweep recipe=quickstart lr=loguniform(1e-4,1e-2) trials=6", "loguniform", 1e-4, 1e-2),
        ("sweep recipe=quickstart lr=LogUniform(1e-4,1e-2) trials=6", "loguniform", 1e-4, 1e-2),
    ],
    ids=["uniform", "loguniform", "kind-is-case-insensitive"],
)
def test_a_range_infers_a_random_search(text: str, kind: str, low: float, high: float) -> None:
    command = sweep(text)
    axis = command.space["lr"]
    assert command.mode == "random" and command.trials == 6
    assert axis.kind == kind and axis.low == low and axis.high == high and axis.continuous
    assert axis.values == []
    assert command.concurrency == DEFAULT_CONCURRENCY


def test_a_random_search_over_listed_values_samples_trials_of_them() -> None:
    command = sweep("sweep recipe=quickstart lr=0.1,0.2 hidden=8,16,32 mode=random trials=5 concurrency=2")
    assert command.mode == "random" and command.trials == 5 and command.concurrency == 2
    assert command.grid_size == 6


def test_a_random_search_keeps_the_users_sampler_seed() -> None:
    command = sweep("sweep recipe=quickstart lr=uniform(0.01,0.5) trials=3 sampler_seed=7")
    assert command.sampler_seed == 7 and command.mode == "random"


def test_trials_cap_a_grid_over_the_limit() -> None:
    command = sweep("sweep recipe=quickstart lr=0.1,0.2,0.3,0.4,0.5 epochs=1,2,3,4,5 hidden=2,4,8,16,32 trials=20")
    assert command.grid_size == 125 > MAX_TRIALS
    assert command.mode == "grid" and command.trials == 20 and command.notes == []


def test_trials_over_the_grid_size_are_clamped_with_a_note() -> None:
    command = sweep("sweep recipe=quickstart lr=0.1,0.2,0.3 trials=10")
    assert command.trials == 3
    assert command.notes == ["trials=10 is more than the grid's 3 combinations: the sweep runs 3"]


@pytest.mark.parametrize(
    ("text", "trials", "concurrency"),
    [
        ("sweep recipe=quickstart lr=0.1,0.2,0.3 concurrency=10", 3, 3),
        ("sweep recipe=quickstart lr=uniform(0.1,0.5) trials=2 concurrency=8", 2, 2),
        ("sweep recipe=quickstart lr=uniform(0.1,0.5) trials=12 concurrency=8", 12, 8),
        ("sweep recipe=quickstart lr=uniform(0.1,0.5) trials=1", 1, 1),
    ],
    ids=["grid-clamped", "random-clamped", "random-kept", "one-trial-one-at-a-time"],
)
def test_concurrency_never_exceeds_the_trials(text: str, trials: int, concurrency: int) -> None:
    command = sweep(text)
    assert (command.trials, command.concurrency) == (trials, concurrency)


def test_fixed_keys_next_to_swept_keys_are_overrides_and_presets_are_not_swept() -> None:
    command = sweep("sweep recipe=quickstart preset=cpu-small,spot lr=0.1,0.2 epochs=3 seed=1e3 --dry-run")
    assert list(command.space) == ["lr"]
    assert command.presets == ["cpu-small", "spot"]
    assert command.overrides == {"epochs": 3, "seed": 1000.0}
    assert command.written == {"seed": "1e3"}
    assert command.dry_run is True


def test_a_sweep_command_round_trips_through_json() -> None:
    command = sweep("sweep recipe=quickstart lr=loguniform(1e-4,1e-2) hidden=8,16 trials=4 epochs=2")
    assert SweepCommand.model_validate_json(command.model_dump_json()) == command


INVALID = [
    ("sweep recipe=quickstart mode=grid lr=uniform(0.1,1) trials=3", "which a grid cannot enumerate"),
    ("sweep recipe=quickstart mode=grid lr=uniform(0.1,1) trials=3", "mode=random"),
    ("sweep recipe=quickstart lr=0.1,0.2 mode=bayes", "expected grid or random"),
    ("sweep recipe=quickstart lr=uniform(0.1,1)", "a random sweep needs trials=N"),
    ("sweep recipe=quickstart lr=loguniform(0.001,0.1)", "a random sweep needs trials=N"),
    ("sweep recipe=quickstart lr=0.1,0.2 mode=random", "a random sweep needs trials=N"),
    (
        "sweep recipe=quickstart lr=0.1,0.2,0.3,0.4,0.5 epochs=1,2,3,4,5 hidden=2,4,8,16,32",
        "this grid has 125 trials (5 × 5 × 5), over the limit of 100",
    ),
    ("sweep recipe=quickstart lr=0.1,0.2 trials=0", "trials=0 is out of bounds: 1..100"),
    ("sweep recipe=quickstart lr=0.1,0.2 trials=101", "trials=101 is out of bounds"),
    ("sweep recipe=quickstart lr=0.1,0.2 trials=many", "trials='many': expected a whole number 1..100"),
    ("sweep recipe=quickstart lr=0.1,0.2 concurrency=0", "concurrency=0 is out of bounds: 1..20"),
    ("sweep recipe=quickstart lr=0.1,0.2 sampler_seed=3", "a grid has nothing to sample"),
    ("sweep recipe=quickstart lr=uniform(0.1,1) trials=3 sampler_seed=-1", "sampler_seed=-1 is out of bounds"),
    ("sweep recipe=quickstart lr=0.1,,0.2", "an empty value in the list"),
    ("sweep recipe=quickstart lr=0.1,", "an empty value in the list"),
    ("sweep recipe=quickstart lr=choice(0.1,)", "an empty value in the list"),
    ("sweep recipe=quickstart lr=0.1,0.1", "0.1 is listed twice"),
    ("sweep recipe=quickstart hidden=8,16,8", "8 is listed twice"),
    ("sweep recipe=quickstart lr=choice(0.1)", "a swept key needs at least two values"),
    ("sweep recipe=quickstart lr=uniform(0.5,0.1) trials=3", "the low end must be below the high end"),
    ("sweep recipe=quickstart lr=uniform(0.5,0.5) trials=3", "the low end must be below the high end"),
    ("sweep recipe=quickstart lr=loguniform(0,0.1) trials=3", "both ends must be above 0"),
    ("sweep recipe=quickstart lr=loguniform(-1,0.1) trials=3", "both ends must be above 0"),
    ("sweep recipe=quickstart lr=uniform(low,0.1) trials=3", "uniform(low, …) takes numbers, not 'low'"),
    ("sweep recipe=quickstart lr=uniform(0.1,0.2,0.3) trials=3", "uniform takes two numbers"),
    ("sweep recipe=quickstart gpus=1,2", "gpus=1,2 is a cluster setting"),
    ("sweep recipe=quickstart lr=0.1,0.2 replicas=1,2", "is a cluster setting"),
    ("sweep recipe=quickstart image=a,b", "image is pinned by the recipe"),
    ("sweep recipe=quickstart lr=0.1,0.2 LR=1,2", "'LR' is not a training key"),
    ("sweep recipe=quickstart epochs=3", "`sweep` needs at least one key with several values"),
    ("sweep recipe=quickstart preset=cpu-small,spot", "`sweep` needs at least one key with several values"),
    ("sweep lr=0.1,0.2", "`sweep` needs recipe=NAME"),
    ("sweep recipe=quickstart lr=0.1,0.2 stray", "'stray' is not KEY=VALUE"),
    ("sweep recipe=quickstart lr=0.1,0.2 --force", "unknown flag '--force' for `sweep`"),
]


@pytest.mark.parametrize(
    ("text", "message"), INVALID, ids=[f"{i}-{c[1][:32]}".replace(" ", "-") for i, c in enumerate(INVALID)]
)
def test_invalid_sweeps_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message


def test_a_grid_over_the_limit_says_how_to_cap_it() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("sweep recipe=quickstart lr=0.1,0.2,0.3,0.4,0.5 epochs=1,2,3,4,5 hidden=2,4,8,16,32")
    assert "trials=N" in info.value.message and "mode=random" in info.value.message


def test_a_cluster_key_swept_suggests_a_preset() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("sweep recipe=quickstart gpus=1,2")
    assert "cluster settings come from presets" in info.value.message
    assert info.value.suggestions == ["gpu-8x"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.1", None),
        ("cosine", None),
        ("0.1,0.2", SweepAxis(kind="choice", values=[0.1, 0.2], texts=["0.1", "0.2"])),
        (" 1 , 2 ", SweepAxis(kind="choice", values=[1, 2], texts=["1", "2"])),
        ("linear,cosine", SweepAxis(kind="choice", values=["linear", "cosine"], texts=["linear", "cosine"])),
        ("true,false", SweepAxis(kind="choice", values=[True, False], texts=["true", "false"])),
        ("choice(8,16)", SweepAxis(kind="choice", values=[8, 16], texts=["8", "16"])),
        ("uniform(0,1)", SweepAxis(kind="uniform", low=0.0, high=1.0)),
        ("loguniform(1e-4,1e-2)", SweepAxis(kind="loguniform", low=1e-4, high=1e-2)),
    ],
    ids=["one-number", "one-word", "floats", "spaces-stripped", "words", "bools", "choice", "uniform", "loguniform"],
)
def test_parse_axis(value: str, expected: SweepAxis | None) -> None:
    assert parse_axis("key", value) == expected


def test_one_and_one_point_oh_are_distinct_values() -> None:
    axis = parse_axis("x", "1,1.0")
    assert axis is not None and axis.values == [1, 1.0]
    assert [type(v) for v in axis.values] == [int, float]


@pytest.mark.parametrize(
    ("axis", "text", "continuous"),
    [
        (SweepAxis(kind="choice", values=[0.1, 0.2], texts=["1e-1", "2e-1"]), "1e-1,2e-1", False),
        (SweepAxis(kind="choice", values=[8, 16]), "8,16", False),
        (SweepAxis(kind="uniform", low=0.01, high=0.5), "uniform(0.01,0.5)", True),
        (SweepAxis(kind="loguniform", low=1e-4, high=1e-2), "loguniform(0.0001,0.01)", True),
    ],
    ids=["choice-as-typed", "choice-without-text", "uniform", "loguniform"],
)
def test_an_axis_describes_itself_as_typed(axis: SweepAxis, text: str, continuous: bool) -> None:
    assert axis.describe() == text
    assert axis.continuous is continuous


def test_compare_a_sweep_top_n() -> None:
    command = parse_command("compare my-sweep top=3")
    assert command == CompareCommand(runs=["my-sweep"], top=3)


def test_compare_without_top_leaves_it_to_the_sweep() -> None:
    command = parse_command("compare my-sweep")
    assert isinstance(command, CompareCommand) and command.top is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("compare my-sweep top=1", "expected a whole number 2..10"),
        ("compare my-sweep top=11", "expected a whole number 2..10"),
        ("compare my-sweep top=three", "expected a whole number 2..10"),
        ("compare run-a run-b top=3", "top=N picks the best trials of one sweep"),
    ],
    ids=["top-1", "top-11", "top-not-a-number", "top-with-two-runs"],
)
def test_compare_top_is_refused_out_of_range_or_with_several_runs(text: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
