"""Table blocks cut to Slack's 100 rows × 20 cells, the whole table as CSV, a bounded text fallback."""

from __future__ import annotations

import csv
import io

from bot.slack.tables import Cell, Table, fallback_text, overflow_note, table_block, table_csv


def grid(rows: int, columns: int) -> Table:
    header = [f"c{j}" for j in range(columns)]
    return Table(header=header, rows=[[Cell(f"{i}.{j}") for j in range(columns)] for i in range(rows)])


def test_a_table_that_fits_is_whole_with_the_header_as_its_first_row() -> None:
    table = Table(
        header=["run", "eval_loss"],
        rows=[[Cell("a", bold=True, emoji="trophy"), Cell("1.5")], [Cell("b"), Cell("")]],
        align={"eval_loss": "right"},
    )
    block = table_block(table)
    assert block["type"] == "table" and table.fits and overflow_note(table, noun="runs", where="x") is None
    assert block["rows"][0] == [{"type": "raw_text", "text": "run"}, {"type": "raw_text", "text": "eval_loss"}]
    best = block["rows"][1][0]
    assert best["type"] == "rich_text"
    parts = best["elements"][0]["elements"]
    assert parts[0] == {"type": "text", "text": "a", "style": {"bold": True}} and parts[-1]["name"] == "trophy"
    assert block["rows"][2][1] == {"type": "raw_text", "text": "—"}  # Slack refuses an empty raw_text
    assert block["column_settings"] == [{"align": "left"}, {"align": "right"}]


def test_over_99_rows_or_20_columns_the_block_is_cut_and_the_csv_is_whole() -> None:
    table = grid(150, 24)
    block = table_block(table)
    assert len(block["rows"]) == 100 and all(len(row) == 20 for row in block["rows"])
    assert (table.rows_left_out, table.columns_left_out) == (51, 4)
    note = overflow_note(table, noun="trials", where="the rest is in the thread")
    assert note is not None and "the first 99 of 150 trials and the first 20 of 24 columns" in note
    lines = list(csv.reader(io.StringIO(table_csv(table).decode())))
    assert len(lines) == 151 and lines[0][-1] == "c23" and lines[-1][-1] == "149.23"


def test_the_text_fallback_stops_within_its_limit_and_counts_the_rest() -> None:
    text = fallback_text("Title", [f"line {i:03d}" for i in range(1000)], limit=200)
    assert len(text) <= 200 and text.startswith("Title\nline 000\n") and text.endswith(" more")
    shown = text.count("line ")
    assert text.endswith(f"… and {1000 - shown} more")
    assert fallback_text("Title", ["a", "b"]) == "Title\na\nb"
