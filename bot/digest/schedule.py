"""A digest command as a crontab expression. Pure."""

from __future__ import annotations

from bot.grammar import DigestCommand


def cron_for(cmd: DigestCommand) -> str:
    """The crontab expression (minute hour dom month dow) of a daily/weekly digest command."""
    if cmd.time is None:
        raise ValueError(f"digest {cmd.mode} has no time")
    hour, minute = (int(part) for part in cmd.time.split(":"))
    if cmd.mode == "daily":
        return f"{minute} {hour} * * *"
    if cmd.mode == "weekly" and cmd.day:
        return f"{minute} {hour} * * {cmd.day[:3].lower()}"
    raise ValueError(f"digest {cmd.mode} cannot be scheduled")


def describe_schedule(cron: str, timezone: str) -> str:
    """A stored schedule as a person says it: `daily at 09:00 (UTC)`, `weekly on mon at 09:00 (Europe/Berlin)`."""
    minute, hour, _dom, _month, dow = cron.split()
    when = f"{int(hour):02d}:{int(minute):02d}"
    if dow == "*":
        return f"daily at {when} ({timezone})"
    return f"weekly on {dow} at {when} ({timezone})"
