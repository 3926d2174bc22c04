"""Block Kit `table` blocks within Slack's limits, the same table as CSV, and a bounded text fallback. Pure.

Slack's table block (docs.slack.dev/reference/block-kit/blocks/table-block): `rows` holds at most 100 rows — the
header row is one of them, Slack has no separate header — each of at most 20 cells, `raw_text` or `rich_text`;
a message holds one table. What does not fit is cut here, and the whole table goes out as a CSV file instead.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from slack_sdk.models.blocks import (
    RawTextObject,
    RichTextBlock,
    RichTextElementParts,
    RichTextSectionElement,
    TableBlock,
    TableBlockColumnSettings,
)

MAX_TABLE_ROWS = 100  # the header row included
MAX_TABLE_CELLS = 20
# Slack truncates a message's `text` at 40,000 characters and advises under 4,000 (chat.postMessage, "text").
MAX_FALLBACK_CHARS = 4_000
# raw_text needs at least one character (slack_sdk's RawTextObject checks it): an empty value is shown as this.
EMPTY = "—"

Align = Literal["left", "center", "right"]


@dataclass(frozen=True)
class Cell:
    """One cell: plain text, bold and followed by an emoji when it marks something (the best run)."""

    text: str
    bold: bool = False
    emoji: str | None = None

    @property
    def plain(self) -> str:
        """The cell as one string (the emoji as its `:code:`), for CSV and text."""
        return (self.text or EMPTY) + (f" :{self.emoji}:" if self.emoji else "")


@dataclass(frozen=True)
class Table:
    """A header and rows of cells (every row as long as the header); `align` per column, by header name."""

    header: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    align: dict[str, Align] = field(default_factory=dict)

    @property
    def rows_left_out(self) -> int:
        """Data rows a table block cannot hold (after the header, 99 fit)."""
        return max(0, len(self.rows) - (MAX_TABLE_ROWS - 1))

    @property
    def columns_left_out(self) -> int:
        """Columns a table block cannot hold (20 fit)."""
        return max(0, len(self.header) - MAX_TABLE_CELLS)

    @property
    def fits(self) -> bool:
        """Whether the whole table fits in one table block."""
        return not self.rows_left_out and not self.columns_left_out


def table_block(table: Table) -> dict[str, Any]:
    """The table as a Block Kit table block: the header row, then the first 99 rows and 20 columns."""
    width = min(len(table.header), MAX_TABLE_CELLS)
    header = [_cell(Cell(name)) for name in table.header[:width]]
    body = [[_cell(cell) for cell in row[:width]] for row in table.rows[: MAX_TABLE_ROWS - 1]]
    align: list[Align] = [table.align.get(name, "left") for name in table.header[:width]]
    # Settings only up to the last column not aligned left: Slack gives the columns after it the default (left).
    while align and align[-1] == "left":
        align.pop()
    settings = [TableBlockColumnSettings(align=a) for a in align] or None
    return TableBlock(rows=[header, *body], column_settings=settings).to_dict()


def table_csv(table: Table) -> bytes:
    """The whole table as CSV (UTF-8, a header line then one line per row), for a file in the thread."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows([cell.plain for cell in row] for row in table.rows)
    return out.getvalue().encode()


def overflow_note(table: Table, *, noun: str, where: str) -> str | None:
    """What the table block leaves out and where the rest is (`where`: the CSV's place), or None when it fits."""
    if table.fits:
        return None
    left = []
    if table.rows_left_out:
        left.append(f"the first {MAX_TABLE_ROWS - 1} of {len(table.rows)} {noun}")
    if table.columns_left_out:
        left.append(f"the first {MAX_TABLE_CELLS} of {len(table.header)} columns")
    limits = f"Slack's table holds {MAX_TABLE_ROWS} rows of {MAX_TABLE_CELLS} cells"
    return f"The table shows {' and '.join(left)} ({limits}); {where}."


def fallback_text(title: str, lines: Sequence[str], limit: int = MAX_FALLBACK_CHARS) -> str:
    """`title` then as many of `lines` as fit in `limit` characters, and how many did not (the message's `text`)."""
    out = title
    for shown, line in enumerate(lines):
        more = f"\n… and {len(lines) - shown} more"
        if len(out) + 1 + len(line) + len(more) > limit:
            return out + more
        out = f"{out}\n{line}"
    return out


def _cell(cell: Cell) -> RawTextObject | RichTextBlock:
    """A plain cell as raw_text; a marked one as rich_text (bold and an emoji need rich text)."""
    if not cell.bold and not cell.emoji:
        return RawTextObject(text=cell.text or EMPTY)
    parts: list[Any] = [RichTextElementParts.Text(text=cell.text or EMPTY, style={"bold": True} if cell.bold else None)]
    if cell.emoji:
        parts += [RichTextElementParts.Text(text=" "), RichTextElementParts.Emoji(name=cell.emoji)]
    return RichTextBlock(elements=[RichTextSectionElement(elements=parts)])
