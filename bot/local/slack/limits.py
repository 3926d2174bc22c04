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

KNOWN_BLOCK_TYPES = frozenset(
    {"section", "divider", "header", "context", "actions", "image", "input", "rich_text", "file", "video", "markdown"}
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
    return errors


def message_error(text: Any, blocks: Any, *, require_content: bool = True) -> tuple[str, list[str]] | None:
    """The Web API error for a message body (`msg_too_long`, `invalid_blocks`, `no_text`), or None."""
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        return "msg_too_long", []
    if blocks is not None:
        errors = block_errors(blocks)
        if errors:
            return "invalid_blocks", errors
    if require_content and not text and not blocks:
        return "no_text", []
    return None
