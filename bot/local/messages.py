"""What a person reads of a Slack message in the local shell, and a one-line summary of an edit. Pure.

A status card is edited in place many times; reprinting it whole each time buries everything else, so
an edit is told as what changed: `sft-tiny-3f2a…: running → succeeded · step 40/40 · eval_loss 3.52`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

SEPARATOR = " · "  # how the bot's cards and posts separate the parts of a line
TITLE_CHARS = 32
SEGMENT_CHARS = 60
SUMMARY_CHARS = 220
# A short change reads best as `old → new`; a longer one is shown as its new words only.
ARROW_WORDS = 4
# Changed lines at least this alike (difflib ratio) are told as one line edited, not one gone and one new.
LIKENESS = 0.5

_LINK = re.compile(r"<([^<>|]+)\|([^<>]+)>")
_BARE_LINK = re.compile(r"<([^<>|]+)>")
_EMOJI = re.compile(r"(?<!\S):[a-z0-9_+\-']+:(?!\S)")
_BAR = re.compile(r"[█░▏▎▍▌▋▊▉]+")
_BOLD = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
_STRIKE = re.compile(r"(?<![\w~])~([^~\n]+)~(?![\w~])")
_HEADING = re.compile(r"^\*([^*\n]+)\*\s+(\S.*)$")
_SPACES = re.compile(r"\s+")
_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^<>]*)?>")
_GROUP_MENTION = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|([^<>]*))?>")
_SPECIAL_MENTION = re.compile(r"<!(here|channel|everyone)(?:\|[^<>]*)?>")
_CHANNEL_MENTION = re.compile(r"<#([CGD][A-Z0-9]+)(?:\|([^<>]*))?>")
_DATE = re.compile(r"<!date\^[^<>|]*\|([^<>]*)>")
# A message's permalink (`…/archives/C0TRAIN01/p1796675708710842`): the shell prints messages by their ts.
_PERMALINK = re.compile(r"^https?://[^/]+/archives/[CGD][A-Z0-9]+/p(\d{10})(\d{6})(?:[?#].*)?$")
# Slack's wording where the local session makes it wrong: said as it is here.
LOCAL_WORDING = {
    "this bot now talks to another Slack workspace": (
        "`finetune-bot local` started a fresh Slack stand-in, which keeps no messages between sessions"
    ),
}


@dataclass(frozen=True)
class Names:
    """How the workspace's ids read: a member by name, a user group by handle, a channel by name (else the id)."""

    user: Callable[[str], str] = str
    group: Callable[[str], str] = str
    channel: Callable[[str], str] = str


NO_NAMES = Names()


def decode_entities(text: str) -> str:
    """Slack's three escapes as the reader sees them (`&amp;` last, so `&amp;lt;` reads `&lt;`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def with_url(url: str, label: str) -> str:
    """A link as a terminal shows it: its label, then where it goes (once, when the label is the address); a link to
    a message, as the `[ts]` the shell printed it with."""
    permalink = _PERMALINK.match(url)
    if permalink is not None:
        return f"{label} [{permalink.group(1)}.{permalink.group(2)}]"
    return label if label in (url, url.removeprefix("mailto:")) else f"{label} ({url})"


def label_only(url: str, label: str) -> str:
    """A link as one line of a summary reads it: its label."""
    return label


def entities(text: str, names: Names, link: Callable[[str, str], str]) -> str:
    """Slack's `<…>` entities as a person reads them: `@alice`, `@ml-approvers`, `@here`, `#ml-training`, a date's
    fallback, a link as `link(url, label)` says, a bare link's address. The one place the shell reads them."""
    text = _USER_MENTION.sub(lambda m: "@" + names.user(m.group(1)), text)
    text = _GROUP_MENTION.sub(lambda m: m.group(2) or "@" + names.group(m.group(1)), text)
    text = _SPECIAL_MENTION.sub(lambda m: "@" + m.group(1), text)
    text = _CHANNEL_MENTION.sub(lambda m: "#" + _channel_name(names, m.group(1), m.group(2)), text)
    text = _DATE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: link(m.group(1), m.group(2)), text)
    return _BARE_LINK.sub(r"\1", text)


def _channel_name(names: Names, channel_id: str, label: str | None) -> str:
    """The channel's name as the workspace has it, else the name the mention carries, else its id."""
    name = names.channel(channel_id)
    return label if name == channel_id and label else name


def as_shown(text: str, names: Names) -> str:
    """Mrkdwn as Slack shows it: mentions and channels by name, links with their address, entities decoded, local
    wording where Slack's is wrong."""
    text = entities(text, names, with_url)
    for slack, local in LOCAL_WORDING.items():
        text = text.replace(slack, local)
    return decode_entities(text)


def readable(text: str, names: Names) -> str:
    """A line as shown (`as_shown`), its markup removed: how the shell prints a Home tab's or a form's lines."""
    return unmarked(as_shown(text, names))


def message_text(message: dict[str, Any], saved: Mapping[str, Path] | None = None) -> str:
    """What a person would read: the blocks' texts (buttons as `[Label]`), else the fallback text; files last
    (with where each was saved, when `saved` says)."""
    parts: list[str] = []
    for block in message.get("blocks") or []:
        text = block.get("text")
        if isinstance(text, dict) and text.get("text"):
            parts.append(str(text["text"]))
        for item in block.get("fields") or []:
            if isinstance(item, dict) and item.get("text"):
                parts.append(str(item["text"]))
        for element in block.get("elements") or []:
            if isinstance(element, dict) and element.get("type") in ("mrkdwn", "plain_text"):
                parts.append(str(element.get("text") or ""))
            elif isinstance(element, dict) and element.get("type") == "button":
                parts.append(f"[{element['text']['text']}]")
        if block.get("type") == "table":
            parts.extend(SEPARATOR.join(_cell_text(cell) for cell in row) for row in block.get("rows") or [])
    if not parts and message.get("text"):
        parts.append(str(message["text"]))
    for item in message.get("files") or []:
        where = (saved or {}).get(str(item.get("id")))
        kept = f", saved as {where}" if where is not None else ""
        parts.append(f"[file {item.get('title') or item.get('name')}, {item.get('size', 0)} bytes{kept}]")
    return "\n".join(parts)


def _cell_text(cell: Any) -> str:
    """A table cell as it reads: raw text as it is, rich text's words and emoji codes."""
    if not isinstance(cell, dict):
        return ""
    if cell.get("type") != "rich_text":
        return str(cell.get("text") or "")
    words = [
        str(part.get("text") or "") if part.get("type") != "emoji" else f":{part.get('name')}:"
        for section in cell.get("elements") or []
        for part in section.get("elements") or []
    ]
    return "".join(words)


def plain(text: str, names: Names = NO_NAMES) -> str:
    """Mrkdwn as one line of a summary reads it: links by their label, no emoji codes, bold, code marks or bars."""
    return unmarked(decode_entities(entities(text, names, label_only)))


def unmarked(text: str) -> str:
    """Text without emoji codes, progress bars, bold, strike-through or code marks, its spaces folded."""
    text = _EMOJI.sub(" ", text)
    text = _BAR.sub(" ", text)
    text = _BOLD.sub(r"\1", text)
    text = _STRIKE.sub(r"\1", text)
    return _SPACES.sub(" ", text.replace("`", "")).strip()


class Line(NamedTuple):
    """One readable line of a message: its `*Heading*` (or ""), and its parts as split at ` · `."""

    heading: str
    parts: tuple[str, ...]


def lines(message: dict[str, Any], names: Names = NO_NAMES) -> list[Line]:
    """The message's readable lines, markup removed."""
    result: list[Line] = []
    for text in message_text(message).splitlines():
        heading = _HEADING.match(text.strip())
        head, rest = (plain(heading.group(1), names), heading.group(2)) if heading else ("", text)
        parts = tuple(p for p in (plain(piece, names) for piece in rest.split(SEPARATOR)) if p)
        if head or parts:
            result.append(Line(head, parts))
    return result


def title(message: dict[str, Any], names: Names = NO_NAMES) -> str:
    """A short name for the message: a header's last part (a card's ends in the run's name), else its first part."""
    blocks = message.get("blocks") or []
    if blocks and blocks[0].get("type") == "header":
        words = plain(str((blocks[0].get("text") or {}).get("text") or ""), names)
        if words:
            return _clip(words.split(SEPARATOR)[-1], TITLE_CHARS)
    first = next(iter(lines(message, names)), None)
    return _clip(first.heading or first.parts[0], TITLE_CHARS) if first is not None else "(no text)"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_button(line: Line) -> bool:
    only = line.parts[0] if len(line.parts) == 1 and not line.heading else ""
    return only.startswith("[") and only.endswith("]") and not only.startswith("[file ")


def _key(part: str) -> str | None:
    """What a part is about (`step 20/40` → `step`); None for a bare word such as a status."""
    words = part.split()
    return words[0] if len(words) > 1 else None


def describe_change(before: str, after: str) -> str:
    """One changed part: its label and new words (`step 40/40`), else `old → new` when short, else the new part."""
    old, new = before.split(), after.split()
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    removed, added = old[start : len(old) - end], new[start : len(new) - end]
    if start > 0 and added:
        # `step 20/40` → `step 40/40`: the word before the change names what changed.
        return _clip(" ".join([old[start - 1], *added]), SEGMENT_CHARS)
    if removed and added and len(old) <= ARROW_WORDS and len(new) <= ARROW_WORDS:
        return f"{before} → {after}"
    return _clip(after, SEGMENT_CHARS)


def describe_line(before: tuple[str, ...], after: tuple[str, ...]) -> list[str]:
    """The changes between two versions of one line, matching parts by what they are about."""
    gone = [part for part in before if part not in after]
    came = [part for part in after if part not in before]
    changes: dict[str, str] = {}
    for new in came:
        match = next((old for old in gone if _key(old) is not None and _key(old) == _key(new)), None)
        if match is not None:
            gone.remove(match)
            changes[new] = describe_change(match, new)
    unmatched = [new for new in came if new not in changes]
    bare_new = [new for new in unmatched if _key(new) is None]
    bare_old = [old for old in gone if _key(old) is None]
    if len(bare_new) == 1 and len(bare_old) == 1:
        # `running` → `succeeded`: one word (a status) replaced by another.
        gone.remove(bare_old[0])
        changes[bare_new[0]] = describe_change(bare_old[0], bare_new[0])
    elif len(unmatched) == 1 and len(gone) == 1:
        changes[unmatched[0]] = describe_change(gone.pop(), unmatched[0])
    for new in unmatched:
        changes.setdefault(new, _clip(new, SEGMENT_CHARS))
    return [changes[new] for new in came] + ["−" + _clip(old, SEGMENT_CHARS) for old in gone]


def _pair_lines(gone: list[Line], came: list[Line]) -> list[tuple[Line | None, Line | None]]:
    """Old and new versions of changed lines: in order when as many changed, else by likeness; None for none."""
    if len(gone) == len(came):
        return list(zip(gone, came, strict=True))
    pairs: list[tuple[Line | None, Line | None]] = []
    left = list(gone)
    for new in came:
        scored = [(difflib.SequenceMatcher(None, _joined(old), _joined(new)).ratio(), old) for old in left]
        ratio, best = max(scored, key=lambda pair: pair[0], default=(0.0, None))
        if best is not None and ratio >= LIKENESS:
            left.remove(best)
            pairs.append((best, new))
        else:
            pairs.append((None, new))
    return pairs + [(old, None) for old in left]


def _joined(line: Line) -> str:
    return SEPARATOR.join([line.heading, *line.parts] if line.heading else line.parts)


def describe_edit(before: dict[str, Any], after: dict[str, Any], names: Names = NO_NAMES) -> str | None:
    """What an edit changed, on one line (`title: change · change …`); None when nothing readable changed."""
    old_lines, new_lines = lines(before, names), lines(after, names)
    old = [line for line in old_lines if not _is_button(line)]
    new = [line for line in new_lines if not _is_button(line)]
    changes: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        for was, now in _pair_lines(old[i1:i2], new[j1:j2]):
            # A new line is told by its parts (`eval_loss 3.52`), which say more than its heading.
            old_parts = was.parts if was is not None else ()
            new_parts = (now.parts or (now.heading,)) if now is not None else ()
            if was is not None and now is not None and now.heading and was.heading != now.heading:
                changes.append(describe_change(was.heading, now.heading))
            changes.extend(describe_line(old_parts, new_parts))
    # A button that appears is news (`[Request registration]`); one that goes follows from the status.
    changes.extend(line.parts[0] for line in new_lines if _is_button(line) and line not in old_lines)
    if not changes:
        return None
    return _clip(f"{title(after, names)}: {SEPARATOR.join(changes)}", SUMMARY_CHARS)
