"""Input at the edges (issue 33 G), in the pure parser: empty values, names beyond ASCII, huge numbers, help topics."""

from __future__ import annotations

import zoneinfo

import pytest

from bot.grammar import SUBCOMMANDS, CommandError, RunCommand, closest, parse_command

# `key=` with nothing after it is refused for every key, naming the key and what it takes: never read as "not
# given" (`preset=` used to run on the recipe's default presets without a word).
EMPTY_VALUES = [
    ("run recipe=sft-tiny preset=", "preset= has no value: preset takes preset names, e.g. preset=cpu-small"),
    ("run recipe=sft-tiny presets= --dry-run", "presets= has no value: presets takes preset names"),
    ("run recipe= preset=cpu-small", "recipe= has no value: recipe takes a recipe name, e.g. recipe=sft-tiny"),
    ("run recipe=sft-tiny lr=", "lr= has no value: give lr=VALUE, or leave lr out for the recipe's value"),
    ("preflight recipe=sft-tiny-ddp seed=", "seed= has no value: give seed=VALUE"),
    ("sweep recipe=sft-tiny lr=1e-3,3e-3 mode=", "mode= has no value: mode takes grid or random"),
    ("sweep recipe=sft-tiny lr=", "lr= has no value"),
    ("logs a1b2c3d4 lines=", "lines= has no value: lines takes a whole number of log lines"),
    ("resume a1b2c3d4 checkpoint=", "checkpoint= has no value: checkpoint takes latest or step-N"),
    ("resume a1b2c3d4 max_steps=", "max_steps= has no value: max_steps takes a whole number of steps"),
    ("compare a1b2c3d4 b1b2c3d4 metric=", "metric= has no value: metric takes a metric name"),
    ("register a1b2c3d4 model=", "model= has no value: model takes a model name"),
    ("promote tiny-chat:v1 stage=", "stage= has no value: stage takes staging or production"),
    ("usage by=", "by= has no value: by takes user, recipe or preset"),
    ("budget set 10 per=", "per= has no value: per takes week or month"),
    ("digest daily 09:00 tz=", "tz= has no value: tz takes an IANA time zone"),
    ("status a1b2c3d4 color=", "color= has no value: give color=VALUE (see /finetune help status)"),
]


EMPTY_IDS = [
    "run-preset",
    "run-presets",
    "run-recipe",
    "run-training-key",
    "preflight-training-key",
    "sweep-mode",
    "sweep-axis",
    "logs-lines",
    "resume-checkpoint",
    "resume-max-steps",
    "compare-metric",
    "register-model",
    "promote-stage",
    "usage-by",
    "budget-per",
    "digest-tz",
    "status-unknown-key",
]


@pytest.mark.parametrize(("text", "message"), EMPTY_VALUES, ids=EMPTY_IDS)
def test_an_empty_value_is_refused_naming_the_key_and_what_it_takes(text: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message


# Names beyond ASCII reach the catalog as written, which refuses them with the closest catalog names; they are
# never lower-cased (the Kelvin sign would become k and name an existing recipe without a word).
NAMES = [
    ("run recipe=sft-tíny", "sft-tíny", []),
    ("run recipe=SFT-TÍNY", "SFT-TÍNY", []),
    ("run recipe=\u212aquickstart", "\u212aquickstart", []),
    ("run recipe=sft-tiny preset=cpu-smáll,spot", "sft-tiny", ["cpu-smáll", "spot"]),
    ("run recipe=sft-ti\u0301ny", "sft-tíny", []),  # decomposed as typed on some keyboards: read composed
]


@pytest.mark.parametrize(("text", "recipe", "presets"), NAMES, ids=["accent", "upper", "kelvin", "preset", "nfd"])
def test_names_beyond_ascii_are_passed_on_unchanged(text: str, recipe: str, presets: list[str]) -> None:
    command = parse_command(text)
    assert isinstance(command, RunCommand)
    assert command.recipe == recipe and command.presets == presets


@pytest.mark.parametrize("text", ["run recipe=sft_tíny", "run recipe=-tíny", "run recipe=tí.ny"])
def test_a_name_beyond_ascii_is_still_a_name(text: str) -> None:
    with pytest.raises(CommandError, match="is not a name"):
        parse_command(text)


def test_closest_names_fold_accents_and_case() -> None:
    assert closest("sft-tíny", ["quickstart", "sft-tiny", "dpo-tiny"]) == ["sft-tiny", "dpo-tiny"]
    assert closest("SFT-TÍNY", ["quickstart", "sft-tiny"]) == ["sft-tiny"]
    assert closest("cpu-smáll", ["cpu-small", "cpu-large", "spot"])[0] == "cpu-small"
    # Exact-case matches still come first where case carries meaning.
    assert closest("Etc", sorted(zoneinfo.available_timezones()))[0].startswith("Etc/")


def test_a_huge_whole_number_is_out_of_bounds_not_a_float() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("resume a1b2c3d4 max_steps=99999999999999999999999")
    assert info.value.message == (
        "max_steps=99999999999999999999999 is out of bounds: a whole number of at most 18 digits"
    )


def test_an_unknown_help_topic_lists_the_topics() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("help nosuch")
    assert info.value.message.startswith("no help topic 'nosuch' (topics: run, status, logs, ")
    assert all(topic in info.value.message for topic in SUBCOMMANDS)
