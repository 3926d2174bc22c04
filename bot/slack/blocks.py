"""Block Kit helpers: pure functions that return block dicts within Slack's limits.

Limits kept here: at most 50 blocks per message, 3000 characters per section text, 150 per
header, 10 elements per context block. Long lists are split over several sections. Every
capability renders its messages with these; none builds blocks by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000


def escape(text: str) -> str:
    """Escape the three characters Slack mrkdwn treats as control characters.

    The one escaping function: every value that comes from a person or from outside (a reaction name, a typed
    argument, a run or recipe name, Polyaxon's error text) goes through it before it lands in mrkdwn. Backticks do
    not protect: Slack still reads `<!channel>` inside code.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Slack's user ids: U… (a workspace member) or W… (an Enterprise Grid member), capitals and digits.
USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")


def is_user_id(value: object) -> bool:
    """Whether `value` is a string in Slack's user id shape (`U0123ABCD`, `W0123ABCD`)."""
    return isinstance(value, str) and USER_ID.fullmatch(value) is not None


def mention(user_id: str) -> str:
    """`<@ID>` for a value in Slack's user id shape; anything else escaped as plain text, never as markup."""
    return f"<@{user_id}>" if is_user_id(user_id) else escape(str(user_id))


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


# --- run buttons (handlers/actions.py) -------------------------------------------------------------

# A button with this action id (or `finetune_command:<suffix>`, since ids are unique per message) stands for one of
# the run commands. Its value is `<action>:<run name>`, never command text: a click is read by parse_button_value
# and mapped to its command from a fixed list (handlers/actions.py), so a value changed on its way back can name
# another run, or nothing, but never another command.
COMMAND_ACTION_ID = "finetune_command"
# A run name as the bot writes one (the grammar's RUN word): letters, digits, `.`, `_` and `-`.
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class ButtonAction(StrEnum):
    """What a run button does; handlers/actions.py maps each to the command it stands for."""

    STATUS = "status"
    LOGS = "logs"
    COMPARE = "compare"
    COMPARE_TOP = "compare-top"  # a sweep's best trials side by side
    STOP = "stop"
    OUTPUTS = "outputs"
    REGISTER = "register"
    RESUME = "resume"


@dataclass(frozen=True)
class ButtonValue:
    """A run button's value: what it does, and to which run."""

    action: ButtonAction
    run: str

    def encode(self) -> str:
        """As the button's `value`."""
        return f"{self.action.value}:{self.run}"


class ButtonValueError(ValueError):
    """A button value the bot does not render; the message (mrkdwn, escaped) is for the person who clicked."""


def parse_button_value(value: object) -> ButtonValue:
    """The one reader of a run button's value; ButtonValueError for anything the bot would not have rendered."""
    if not isinstance(value, str) or ":" not in value:
        raise ButtonValueError("its value is not an action and a run")
    action, _, run = value.partition(":")
    try:
        parsed = ButtonAction(action)
    except ValueError:
        known = ", ".join(f"`{a.value}`" for a in ButtonAction)
        raise ButtonValueError(f"`{escape(clip(action, 40))}` is not something a button does ({known})") from None
    if RUN_NAME.fullmatch(run) is None:
        raise ButtonValueError(f"`{escape(clip(run, 40))}` is not a run name")
    return ButtonValue(parsed, run)


def command_button(
    label: str, action: ButtonAction, run: str, *, suffix: str | None = None, style: str | None = None
) -> dict[str, Any]:
    """A button that asks for `action` on run `run` for whoever clicks it (slash commands do not work in threads)."""
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(label, 75)},
        "action_id": COMMAND_ACTION_ID if suffix is None else f"{COMMAND_ACTION_ID}:{suffix}",
        "value": ButtonValue(action, run).encode(),
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
