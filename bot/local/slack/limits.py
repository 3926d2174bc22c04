"""Slack's message limits, checked the way the Web API checks them (`msg_too_long`, `invalid_blocks`)."""

from __future__ import annotations

from typing import Any

MAX_TEXT_CHARS = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT_CHARS = 3_000
MAX_SECTION_FIELDS = 10
MAX_FIELD_CHARS = 2_000
MAX_HEADER_CHARS = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_TEXT_CHARS = 75
MAX_BUTTON_VALUE_CHARS = 2_000
MAX_ACTION_ID_CHARS = 255
# The table block (docs.slack.dev/reference/block-kit/blocks/table-block): 100 rows, the header row among them,
# 20 cells a row, 20 column settings; cells raw_text or rich_text (slack_sdk 3.48's TableBlock adds raw_number).
MAX_TABLE_ROWS = 100
MAX_TABLE_CELLS = 20
TABLE_CELL_TYPES = frozenset({"raw_text", "rich_text", "raw_number"})
COLUMN_ALIGNS = frozenset({"left", "center", "right"})

KNOWN_BLOCK_TYPES = frozenset(
    {
        "section",
        "divider",
        "header",
        "context",
        "actions",
        "image",
        "input",
        "rich_text",
        "file",
        "video",
        "markdown",
        "table",
    }
)


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        value = obj.get("text", "")
        return value if isinstance(value, str) else ""
    return ""


def block_errors(blocks: Any, *, max_blocks: int = MAX_BLOCKS, where: str = "/blocks") -> list[str]:
    """Why Slack would answer `invalid_blocks` for these blocks (a message's 50, a view's 100); empty when valid."""
    if not isinstance(blocks, list):
        return ["blocks must be an array"]
    errors: list[str] = []
    if len(blocks) > max_blocks:
        errors.append(f"must provide an array with no more than {max_blocks} items [json-pointer:{where}]")
    pointer = where
    for i, block in enumerate(blocks):
        where = f"[json-pointer:{pointer}/{i}]"
        if not isinstance(block, dict) or block.get("type") not in KNOWN_BLOCK_TYPES:
            errors.append(f"unsupported or missing block type {where}")
            continue
        kind = block["type"]
        if kind == "section":
            text = _text_of(block.get("text"))
            fields = block.get("fields") or []
            if not text and not fields:
                errors.append(f"section needs text or fields {where}")
            if len(text) > MAX_SECTION_TEXT_CHARS:
                errors.append(f"must be less than {MAX_SECTION_TEXT_CHARS + 1} characters {where}/text")
            if len(fields) > MAX_SECTION_FIELDS:
                errors.append(f"must provide an array with no more than {MAX_SECTION_FIELDS} items {where}/fields")
            errors.extend(
                f"must be less than {MAX_FIELD_CHARS + 1} characters {where}/fields/{j}"
                for j, field in enumerate(fields)
                if len(_text_of(field)) > MAX_FIELD_CHARS
            )
        elif kind == "header":
            if len(_text_of(block.get("text"))) > MAX_HEADER_CHARS:
                errors.append(f"must be less than {MAX_HEADER_CHARS + 1} characters {where}/text")
        elif kind == "context":
            if len(block.get("elements") or []) > MAX_CONTEXT_ELEMENTS:
                errors.append(f"must provide an array with no more than {MAX_CONTEXT_ELEMENTS} items {where}")
        elif kind == "actions":
            elements = block.get("elements") or []
            if len(elements) > MAX_ACTIONS_ELEMENTS:
                errors.append(f"must provide an array with no more than {MAX_ACTIONS_ELEMENTS} items {where}")
            for j, element in enumerate(elements):
                if not isinstance(element, dict):
                    errors.append(f"invalid element {where}/elements/{j}")
                    continue
                if len(_text_of(element.get("text"))) > MAX_BUTTON_TEXT_CHARS:
                    errors.append(f"must be less than {MAX_BUTTON_TEXT_CHARS + 1} characters {where}/elements/{j}")
                if len(str(element.get("value", ""))) > MAX_BUTTON_VALUE_CHARS:
                    errors.append(f"value too long {where}/elements/{j}/value")
                if len(str(element.get("action_id", ""))) > MAX_ACTION_ID_CHARS:
                    errors.append(f"action_id too long {where}/elements/{j}/action_id")
        elif kind == "table":
            errors.extend(table_errors(block, f"{pointer}/{i}"))
    return errors


def table_errors(block: dict[str, Any], pointer: str) -> list[str]:
    """Why Slack would refuse this table block: its rows, their cells and its column settings."""
    rows = block.get("rows")
    if not isinstance(rows, list) or not rows:
        return [f"must provide a non-empty array of rows [json-pointer:{pointer}/rows]"]
    errors: list[str] = []
    if len(rows) > MAX_TABLE_ROWS:
        errors.append(f"must provide an array with no more than {MAX_TABLE_ROWS} items [json-pointer:{pointer}/rows]")
    width = len(rows[0]) if isinstance(rows[0], list) else 0
    for i, row in enumerate(rows):
        where = f"{pointer}/rows/{i}"
        if not isinstance(row, list) or not row:
            errors.append(f"a row must be a non-empty array of cells [json-pointer:{where}]")
            continue
        if len(row) > MAX_TABLE_CELLS:
            errors.append(f"must provide an array with no more than {MAX_TABLE_CELLS} items [json-pointer:{where}]")
        if len(row) != width:
            errors.append(f"every row must have the same number of cells ({width}) [json-pointer:{where}]")
        for j, cell in enumerate(row):
            problem = _cell_error(cell, f"{where}/{j}")
            if problem:
                errors.append(problem)
    settings = block.get("column_settings")
    if settings is not None:
        where = f"{pointer}/column_settings"
        if not isinstance(settings, list) or len(settings) > MAX_TABLE_CELLS:
            errors.append(f"must provide an array with no more than {MAX_TABLE_CELLS} items [json-pointer:{where}]")
        elif len(settings) > width:
            errors.append(f"more column settings ({len(settings)}) than columns ({width}) [json-pointer:{where}]")
        else:
            errors.extend(
                f"invalid column setting [json-pointer:{where}/{j}]"
                for j, setting in enumerate(settings)
                if not _valid_setting(setting)
            )
    return errors


def _cell_error(cell: Any, where: str) -> str:
    """Why a table cell is refused (empty when it is valid)."""
    kind = cell.get("type") if isinstance(cell, dict) else None
    if kind not in TABLE_CELL_TYPES:
        return f"a cell must be raw_text or rich_text [json-pointer:{where}]"
    if kind == "rich_text":
        elements = cell.get("elements")
        return "" if isinstance(elements, list) and elements else f"rich_text needs elements [json-pointer:{where}]"
    text = cell.get("text")
    if not isinstance(text, str) or not text:
        return f"{kind} needs a non-empty text [json-pointer:{where}/text]"
    value = cell.get("value")
    if kind == "raw_number" and (not isinstance(value, int | float) or isinstance(value, bool)):
        return f"raw_number needs a numeric value [json-pointer:{where}/value]"
    return ""


def _valid_setting(setting: Any) -> bool:
    """A column setting: null (the default) or {align: left|center|right, is_wrapped: bool}, both optional."""
    if setting is None:
        return True
    if not isinstance(setting, dict) or set(setting) - {"align", "is_wrapped"}:
        return False
    return setting.get("align", "left") in COLUMN_ALIGNS and isinstance(setting.get("is_wrapped", False), bool)


def message_error(text: Any, blocks: Any, *, require_content: bool = True) -> tuple[str, list[str]] | None:
    """The Web API error for a message body (`msg_too_long`, `invalid_blocks`, `no_text`), or None."""
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        return "msg_too_long", []
    if blocks is not None:
        errors = block_errors(blocks)
        if errors:
            return "invalid_blocks", errors
        # One table a message. Slack refuses a second one as an attachment error, not a block error: this pair is
        # what public Block Kit validators and linters record Slack answering (Slack's table docs state no code).
        if sum(1 for block in blocks if isinstance(block, dict) and block.get("type") == "table") > 1:
            return "invalid_attachments", ["only_one_table_allowed"]
    if require_content and not text and not blocks:
        return "no_text", []
    return None
