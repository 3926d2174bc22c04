"""A manifest that does not fit its schema, said with the file's own words: the field, what was wrong, and for a key
the schema does not know, the closest keys it does (`trainr` -> `trainer`). Pure."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from bot.grammar import closest, did_you_mean


def explain(exc: ValidationError, schema: type[BaseModel]) -> tuple[str, str]:
    """(the field, the message) of the first error in `exc`, raised validating `schema`."""
    first = exc.errors()[0]
    loc = [str(part) for part in first["loc"]]
    field = ".".join(loc) or "(file)"
    if first["type"] != "extra_forbidden" or not loc:
        return field, first["msg"]
    known = _keys_at(schema, loc[:-1])
    if not known:
        return field, f"unknown key {loc[-1]!r}"
    return field, f"unknown key {loc[-1]!r}{did_you_mean(closest(loc[-1], known))} (the keys here: {', '.join(known)})"


def _keys_at(schema: type[BaseModel], path: list[str]) -> list[str]:
    """The keys the schema takes at `path` (nested models followed; a list's index or a dict's key passed over)."""
    model: Any = schema
    skip = False  # the next part is a dict's key or a list's index
    for part in path:
        if skip:
            skip = False
            continue
        if not _is_model(model):
            return []
        field = model.model_fields.get(part) or next((f for f in model.model_fields.values() if f.alias == part), None)
        if field is None:
            return []
        skip = _is_container(field.annotation)
        model = _model_in(field.annotation)
    if not _is_model(model):
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def _is_container(annotation: Any) -> bool:
    if typing.get_origin(annotation) in (list, dict, tuple):
        return True
    return any(_is_container(arg) for arg in typing.get_args(annotation) if typing.get_origin(annotation) is not None)


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (`X | None`, `list[X]`, `dict[str, X]` looked into), else None."""
    if _is_model(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)
