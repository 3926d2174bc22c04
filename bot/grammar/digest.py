"""`digest`: the channel's run digest schedule, with its time, day and time-zone parsing."""

from __future__ import annotations

import re
import zoneinfo
from typing import Literal

from bot.grammar.lexing import CommandError, _Command, _flags, _key_values, _no_extra, _only_keys, closest, did_you_mean

DAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FULL_DAYS: dict[str, str] = {
    "monday": "mon",
    "tuesday": "tue",
    "wednesday": "wed",
    "thursday": "thu",
    "friday": "fri",
    "saturday": "sat",
    "sunday": "sun",
}

# The longest IANA zone name is about 30 characters; a longer text is shown clipped and not compared.
MAX_TZ = 40

_TIME_RE = re.compile(r"^([01]?[0-9]|2[0-3]):([0-5][0-9])$")


class DigestCommand(_Command):
    """`digest (daily HH:MM | weekly DAY HH:MM | off | now) [TZ]`."""

    name: Literal["digest"] = "digest"
    mode: Literal["daily", "weekly", "off", "now"]
    day: str | None = None
    time: str | None = None
    tz: str | None = None


def _parse_tz(raw: str) -> str:
    try:
        zoneinfo.ZoneInfo(raw)
    # Not found (KeyError), not a normalised key or not a zone file (ValueError), an area such as `Europe`
    # (IsADirectoryError) or a name the file system refuses (OSError): all mean "no such zone".
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        suggestions = closest(raw, sorted(zoneinfo.available_timezones())) if len(raw) <= MAX_TZ else []
        shown = raw if len(raw) <= MAX_TZ else raw[:MAX_TZ] + "…"
        raise CommandError(
            f"unknown time zone {shown!r}{did_you_mean(suggestions)} (use an IANA name such as UTC or Europe/Berlin)",
            suggestions=suggestions,
        ) from exc
    return raw


def _parse_time(raw: str) -> str:
    match = _TIME_RE.match(raw)
    if not match:
        raise CommandError(f"{raw!r} is not a time: expected HH:MM (24-hour), e.g. 09:30")
    return f"{int(match.group(1)):02d}:{match.group(2)}"


def _parse_day(raw: str) -> str:
    lowered = raw.lower()
    if lowered in FULL_DAYS:
        return FULL_DAYS[lowered]
    if lowered in DAYS:
        return lowered
    options = list(DAYS) + list(FULL_DAYS)
    suggestions = closest(lowered, options)
    raise CommandError(f"{raw!r} is not a day (mon … sun){did_you_mean(suggestions)}", suggestions=suggestions)


def _parse_digest(tokens: list[str]) -> DigestCommand:
    usage = "digest (daily HH:MM | weekly DAY HH:MM | off | now) [TZ]"
    positional, pairs = _key_values(tokens, "digest")
    _only_keys(pairs, ("tz",), "digest")
    words, _ = _flags(positional, (), "digest")
    if not words:
        raise CommandError(f"`digest` needs a schedule; usage: {usage}")
    mode, rest = words[0].lower(), words[1:]
    modes = ("daily", "weekly", "off", "now")
    tz = _parse_tz(pairs["tz"]) if "tz" in pairs else None
    if mode == "daily":
        if not rest:
            raise CommandError(f"`digest daily` needs a time HH:MM; usage: {usage}")
        time = _parse_time(rest[0])
        if len(rest) > 2 or (len(rest) == 2 and tz is not None):
            _no_extra(rest[1:], "digest daily HH:MM", usage)
        if len(rest) == 2:
            tz = _parse_tz(rest[1])
        return DigestCommand(mode="daily", time=time, tz=tz)
    if mode == "weekly":
        if len(rest) < 2:
            raise CommandError(f"`digest weekly` needs a day and a time; usage: {usage}")
        day, time = _parse_day(rest[0]), _parse_time(rest[1])
        if len(rest) > 3 or (len(rest) == 3 and tz is not None):
            _no_extra(rest[2:], "digest weekly DAY HH:MM", usage)
        if len(rest) == 3:
            tz = _parse_tz(rest[2])
        return DigestCommand(mode="weekly", day=day, time=time, tz=tz)
    if mode in ("off", "now"):
        _no_extra(rest, f"digest {mode}", usage)
        if tz is not None:
            raise CommandError(f"`digest {mode}` takes no time zone")
        return DigestCommand(mode="off" if mode == "off" else "now")
    suggestions = closest(mode, modes)
    raise CommandError(
        f"no digest schedule {words[0]!r}{did_you_mean(suggestions)}; usage: {usage}", suggestions=suggestions
    )
