"""Block Kit helpers: pure functions that return block dicts within Slack's limits.

Limits kept here: at most 50 blocks per message, 3000 characters per section text, 150 per
header, 10 elements per context block. Long lists are split over several sections. Every
capability renders its messages with these; none builds blocks by hand.
"""

from __future__ import annotations

from typing import Any

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000


def escape(text: str) -> str:
    """Escape the three characters Slack mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header(text: str) -> dict[str, Any]:
    """A header block (plain text, clipped to 150 characters)."""
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, MAX_HEADER), "emoji": True}}


def section(text: str) -> dict[str, Any]:
    """A mrkdwn section block (clipped to 3000 characters)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, MAX_SECTION)}}


def context(*texts: str) -> dict[str, Any]:
    """A context block of mrkdwn elements (at most 10, each clipped)."""
    elements = [{"type": "mrkdwn", "text": clip(t, MAX_CONTEXT_TEXT)} for t in texts[:MAX_CONTEXT_ELEMENTS]]
    return {"type": "context", "elements": elements}


def divider() -> dict[str, Any]:
    """A divider block."""
    return {"type": "divider"}


def sections(title: str, lines: list[str]) -> list[dict[str, Any]]:
    """`title` then `lines`, split over as many sections as the 3000-character limit needs."""
    blocks: list[dict[str, Any]] = []
    current = title
    for line in lines:
        line = clip(line, MAX_SECTION - len(title) - 2)
        if len(current) + 1 + len(line) > MAX_SECTION:
            blocks.append(section(current))
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        blocks.append(section(current))
    return blocks


def cap_blocks(blocks: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """Keep a message within 50 blocks, ending with a note when something was left out."""
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    return [*blocks[: MAX_BLOCKS - 1], context(note)]


# --- command buttons (handlers/actions.py) ---------------------------------------------------------

# A button with this action id (or `finetune_command:<suffix>`, since ids are unique per message)
# carries a `/finetune` command string as its value; a click goes through the same parser as typing.
COMMAND_ACTION_ID = "finetune_command"


def command_button(label: str, command: str, *, suffix: str | None = None, style: str | None = None) -> dict[str, Any]:
    """A button that runs `/finetune <command>` for whoever clicks it (slash commands do not work in threads)."""
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(label, 75)},
        "action_id": COMMAND_ACTION_ID if suffix is None else f"{COMMAND_ACTION_ID}:{suffix}",
        "value": command,
    }
    if style is not None:
        button["style"] = style
    return button


def human_duration(seconds: float) -> str:
    """`42 s`, `3 min 4 s`, `2 h 5 min`: a duration as people read it."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
