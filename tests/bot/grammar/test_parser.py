"""The whole command line: subcommand names, the `/finetune` prefix, its length, and any text at all."""

from __future__ import annotations

import contextlib
import shlex
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.grammar import SUBCOMMANDS, CommandError, DigestCommand, HelpCommand, RunCommand, parse_command

VALID = [
    ("/finetune run recipe=sft-tiny", RunCommand(recipe="sft-tiny")),
    ("  RUN   recipe=sft-tiny  ", RunCommand(recipe="sft-tiny")),
    ("/FINETUNE Run recipe=sft-tiny", RunCommand(recipe="sft-tiny")),
    ("", HelpCommand()),
]

VALID_IDS = [
    "run-with-slash-prefix",
    "run-case-and-spaces",
    "run-upper-case-slash-prefix",
    "empty-is-help",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("stauts", "no subcommand 'stauts'; did you mean status or outputs?", ["status", "outputs"]),
    ("rn recipe=x", "did you mean run?", ["run"]),
    ("x" * 2001, "too long", []),
    ("/FINETUNE stauts", "no subcommand 'stauts'", ["status"]),
]

SHELL = [
    ("run recipe=sft-tiny seed=$(rm -rf /)", "'$('"),
    ("run recipe=sft-tiny seed=`id`", "'`'"),
    ("run recipe=sft-tiny seed=${HOME}", "'${'"),
    ("run recipe=sft-tiny seed=$HOME", "'$HOME'"),
    ("run recipe=sft-tiny seed=1; rm -rf /", "';'"),
    ("run recipe=sft-tiny seed=1 && curl evil", "'&&'"),
    ("run recipe=sft-tiny seed=1 &amp;&amp; curl evil", "'&&'"),  # Slack escapes & < > in what it sends
    ("run recipe=sft-tiny seed=1 || true", "'||'"),
    ("run recipe=sft-tiny seed=1 | sh", "'|'"),
    ("run recipe=sft-tiny scheduler=linear|cosine", "'|'"),
    ("run recipe=sft-tiny seed=1 > /tmp/x", "'>'"),
    ("run recipe=sft-tiny seed=1 &gt; /tmp/x", "'>'"),
    ("run recipe=sft-tiny seed=1 &", "'&'"),
    ("run recipe=sft-tiny 'seed=$(id)'", "'$('"),
    ("status $(id)", "'$('"),
    ("digest daily 09:00 tz=`date`", "'`'"),
]


@pytest.mark.parametrize(("text", "found"), SHELL, ids=[f"shell-{i}" for i in range(len(SHELL))])
def test_shell_syntax_is_refused_up_front(text: str, found: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert info.value.message.startswith("shell syntax is not accepted: values are plain words (")
    assert f"found {found}" in info.value.message
    assert "unknown flag" not in info.value.message and info.value.suggestions == []


@pytest.mark.parametrize(
    "text",
    ["run recipe=sft-tiny lora_target_modules='q_proj v_proj' lr=1e-3", "compare a b metric=eval/loss", "help run"],
    ids=["quoted-words", "slash-in-metric", "help"],
)
def test_commands_without_shell_syntax_are_unchanged(text: str) -> None:
    parse_command(text)


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


SLACKISH = st.text(
    alphabet=st.sampled_from(
        [
            *"abcdefghijklmnopqrstuvwxyz0123456789=,.-_:/ '\"\\{}[]#&*!|<>$`;\n\t",
            *["\u201c", "\u201d", "\u2018", "\u2019", "\u2014", "\u00a0", "\x00", "\x7f", "é"],
        ]
    ),
    max_size=80,
)

PREFIXES = st.sampled_from(
    ["", "run ", "run recipe=sft-tiny ", "digest ", "compare a b ", "logs a ", "trace ", "help "]
)


@settings(max_examples=400, deadline=None)
@given(prefix=PREFIXES, rest=SLACKISH)
def test_any_text_gives_a_command_or_a_command_error(prefix: str, rest: str) -> None:
    try:
        command = parse_command(prefix + rest)
    except CommandError as exc:
        assert exc.message
        return
    assert command.name in {
        "run",
        "status",
        "logs",
        "compare",
        "stop",
        "resume",
        "register",
        "recipes",
        "presets",
        "digest",
        "trace",
        "help",
    }


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_unicode_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(CommandError):
        parse_command(text)


GRAMMAR_WORDS = st.sampled_from(
    [
        *SUBCOMMANDS,
        "/finetune",
        "/FINETUNE",
        "RUN",
        "recipe=",
        "recipe=sft-tiny",
        "recipe=SFT-TINY",
        "preset=",
        "preset=gpu-1x,spot",
        "presets=",
        "seed=",
        "lr=",
        "max_steps=",
        "checkpoint=",
        "checkpoint=step-",
        "lines=",
        "metric=",
        "model=",
        "version=",
        "tz=",
        "resume_from=",
        "nodeSelector=",
        "image=",
        "--dry-run",
        "--force",
        "--exploratory",
        "-",
        "--",
        "=",
        "==",
        "daily",
        "weekly",
        "off",
        "now",
        "mon",
        "09:00",
        "25:99",
        "Europe",
        "Europe/",
        "Europe/Berlin",
        "America",
        "Etc",
        "Etc/GMT+1",
        "../..",
        "/",
        "UTC",
        "x" * 300,
        "1e3",
        "1e999",
        "-1",
        "0",
        "1.5",
        "nan",
        "inf",
        "9" * 25,
        "true",
        "latest",
        "step-1",
        "a1b2c3d4",
        "m:v1",
        ":",
        "'",
        '"',
        "\u201c",
        "\u201d",
        "\u2018",
        "\u2014",
        "\u00a0",
        "\\",
        "{{",
        "}}",
        "é",
        "\U0001f600",
        "\u0130",
        "\u212a",
        "\x00",
    ]
)


GLUE = st.sampled_from([" ", " ", "", "=", "  ", ","])


@settings(max_examples=800, deadline=None)
@given(parts=st.lists(st.tuples(st.one_of(GRAMMAR_WORDS, st.text(max_size=6)), GLUE), max_size=8))
def test_text_built_from_the_grammars_own_words_only_raises_command_error(parts: list[tuple[str, str]]) -> None:
    with contextlib.suppress(CommandError):
        parse_command("".join(word + glue for word, glue in parts))


VALID_STARTS = st.sampled_from(
    [
        "run recipe=sft-tiny",
        "digest daily 09:00",
        "digest weekly mon 09:00",
        "digest now",
        "resume a1b2c3d4",
        "logs a1b2c3d4",
        "compare a1b2c3d4 e5f6a7b8",
        "register a1b2c3d4 model=m",
        "status",
        "help",
    ]
)


@settings(max_examples=500, deadline=None)
@given(
    start=VALID_STARTS,
    positional=st.lists(GRAMMAR_WORDS, max_size=2),
    pairs=st.lists(
        st.tuples(
            st.sampled_from(["tz", "recipe", "preset", "seed", "max_steps", "checkpoint", "lines", "model", "metric"]),
            st.one_of(GRAMMAR_WORDS, st.text(max_size=30)),
        ),
        max_size=3,
    ),
)
def test_valid_starts_with_any_values_only_raise_command_error(
    start: str, positional: list[str], pairs: list[tuple[str, str]]
) -> None:
    text = " ".join([start, *positional, *(f"{key}={value}" for key, value in pairs)])
    with contextlib.suppress(CommandError):
        parse_command(text)


ZONES = sorted(zoneinfo.available_timezones())
# Areas such as Europe or Etc are folders of zone files, not zones.
AREAS = sorted({zone.split("/")[0] for zone in ZONES if "/" in zone})
TZ_LIKE = st.one_of(
    st.sampled_from(AREAS),
    st.sampled_from(ZONES),
    st.builds(lambda zone, cut: zone[:cut], st.sampled_from(ZONES), st.integers(0, 20)),
    st.text(alphabet=st.sampled_from([*"EuropeAmericaUTCetc_/+-.0123456789x", "\x00", "é"]), max_size=300),
)


@settings(max_examples=300, deadline=None)
@given(start=st.sampled_from(["digest daily 09:00", "digest weekly mon 09:00"]), keyed=st.booleans(), tz=TZ_LIKE)
def test_any_time_zone_gives_a_digest_or_a_command_error(start: str, keyed: bool, tz: str) -> None:
    try:
        command = parse_command(f"{start} {'tz=' if keyed else ''}{shlex.quote(tz)}")
    except CommandError as exc:
        assert exc.message and len(exc.message) < 300
        return
    assert isinstance(command, DigestCommand)


def test_the_time_zone_crash_found_by_the_property_is_a_command_error() -> None:
    for text in ("digest daily 09:00 tz=Europe", "digest weekly mon 09:00 Etc", "digest daily 09:00 tz=" + "x" * 300):
        with pytest.raises(CommandError):
            parse_command(text)
