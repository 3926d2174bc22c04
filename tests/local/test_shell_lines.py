"""What the local shell answers to a line it cannot carry out (`bot.local.lines`, pure): who `as` takes, the seconds
of `wait` and `sleep`, and the closest line it understands."""

from __future__ import annotations

import pytest

from bot.local.lines import NO_EMOJI, NO_FORM, PEOPLE, person, seconds, unknown_line


@pytest.mark.parametrize(
    ("who", "found"),
    [("bob", ("bob", "U0BOB0001")), ("Carol", ("carol", "U0CAROL01")), ("U0ALICE01", ("alice", "U0ALICE01"))],
    ids=["name", "any-case", "user-id"],
)
def test_as_takes_the_people_the_shell_offers(who: str, found: tuple[str, str]) -> None:
    assert person(who) == found


def test_every_person_the_shell_offers_has_a_slack_user_id() -> None:
    assert all(user_id[0] in "UW" and user_id.isalnum() and user_id.isupper() for user_id in PEOPLE.values())


def test_as_someone_unknown_is_refused_with_the_known_names_closest_first() -> None:
    with pytest.raises(ValueError) as refused:
        person("carl")
    assert (
        str(refused.value) == "there is no 'carl' in this workspace; the shell acts as carol, alice, bob (`as carol`)"
    )
    with pytest.raises(ValueError, match=r"^there is no 'dave' in this workspace; the shell acts as "):
        person("dave")
    with pytest.raises(ValueError, match=r"^`as` takes a name: alice, bob, carol$"):
        person(" ")


@pytest.mark.parametrize(
    ("word", "verb", "example", "told"),
    [
        ("abc", "wait", "120", "wait takes a number of seconds, e.g. `wait 120`"),
        (None, "sleep", "5", "sleep takes a number of seconds, e.g. `sleep 5`"),
        ("-3", "sleep", "5", "sleep takes a number of seconds, e.g. `sleep 5`"),
        ("nan", "wait", "120", "wait takes a number of seconds, e.g. `wait 120`"),
    ],
    ids=["word", "nothing", "negative", "nan"],
)
def test_wait_and_sleep_say_what_they_take(word: str | None, verb: str, example: str, told: str) -> None:
    with pytest.raises(ValueError) as refused:
        seconds(word, verb=verb, example=example)
    assert str(refused.value) == told


def test_seconds_reads_a_number() -> None:
    assert seconds("2.5", verb="sleep", example="5") == 2.5


@pytest.mark.parametrize(
    ("line", "suggestion"),
    [
        ("hlep", "help"),
        ("hoem", "home"),
        ("wiat 30", "wait 30"),
        ("finetune status", "/finetune status"),
        ("status sft-tiny-1", "/finetune status sft-tiny-1"),
        ("stauts", "/finetune status"),
        ("from run", "form run"),
    ],
    ids=["typo", "home", "wait-keeps-its-seconds", "no-slash", "bare-subcommand", "subcommand-typo", "form"],
)
def test_an_unknown_line_names_the_closest_line_the_shell_understands(line: str, suggestion: str) -> None:
    assert unknown_line(line) == (
        f"unknown input {line!r}; the closest line this shell understands: `{suggestion}` (`help` lists them)"
    )


@pytest.mark.parametrize("line", ["preview", "submit", "cancel", "show", "lr=0.1"])
def test_a_form_line_with_no_form_open_says_how_to_open_one(line: str) -> None:
    assert unknown_line(line) == NO_FORM
    assert "`form run` opens the run form" in NO_FORM


@pytest.mark.parametrize("line", ["+", "-"])
def test_a_bare_reaction_sign_says_it_needs_an_emoji(line: str) -> None:
    assert unknown_line(line) == NO_EMOJI
    assert "+white_check_mark [TS|last]" in NO_EMOJI
