"""`digest`: schedules, days, times and time zones."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, DigestCommand, parse_command

VALID = [
    ("digest daily 09:00", DigestCommand(mode="daily", time="09:00")),
    ("digest daily 9:05 Europe/Berlin", DigestCommand(mode="daily", time="09:05", tz="Europe/Berlin")),
    ("digest weekly Monday 17:30", DigestCommand(mode="weekly", day="mon", time="17:30")),
    ("digest weekly fri 08:00 tz=UTC", DigestCommand(mode="weekly", day="fri", time="08:00", tz="UTC")),
    ("digest off", DigestCommand(mode="off")),
    ("digest now", DigestCommand(mode="now")),
]

VALID_IDS = [
    "digest-daily",
    "digest-daily-tz",
    "digest-weekly-full-day",
    "digest-weekly-tz-key",
    "digest-off",
    "digest-now",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("digest", "needs a schedule", []),
    ("digest daily", "needs a time HH:MM", []),
    ("digest daily 25:00", "is not a time", []),
    ("digest daily 9am", "is not a time", []),
    ("digest weekly 09:00", "needs a day and a time", []),
    ("digest weekly mnday 09:00", "did you mean monday", ["monday"]),
    ("digest daily 09:00 Mars/Olympus", "unknown time zone", []),
    ("digest dialy 09:00", "did you mean daily?", ["daily"]),
    ("digest off now", "unexpected", []),
    ("digest daily 09:00 tz=Europe", "unknown time zone 'Europe'; did you mean Europe/", []),
    ("digest daily 09:00 tz=America", "unknown time zone 'America'; did you mean America/", []),
    ("digest daily 09:00 tz=Asia", "unknown time zone 'Asia'; did you mean Asia/", []),
    ("digest daily 09:00 tz=Etc", "unknown time zone 'Etc'; did you mean Etc/", []),
    ("digest weekly mon 09:00 Europe", "unknown time zone 'Europe'", []),
    ("digest daily 09:00 tz=" + "x" * 300, "unknown time zone 'xxxxxxxx", []),
    ("digest daily 09:00 tz=europe/berlin", "did you mean Europe/Berlin", ["Europe/Berlin"]),
    ("digest daily 09:00 tz=Europe/", "unknown time zone 'Europe/'", []),
    ("digest daily 09:00 tz=../../etc/passwd", "unknown time zone", []),
    ("digest daily 09:00 tz=zone.tab", "unknown time zone", []),
    ("digest daily 09:00 tz=__pycache__", "unknown time zone", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


def test_a_very_long_time_zone_is_clipped_in_the_message() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("digest daily 09:00 tz=" + "x" * 300)
    assert len(info.value.message) < 200
