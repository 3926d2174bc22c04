"""Reading one named catalog file (a dataset entry, a suite): YAML, its schema, its name equal to its file's."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from bot.catalog.errors import CatalogError
from bot.catalog.schema_errors import explain
from bot.catalog.yamlfile import safe_load

Named = TypeVar("Named", bound=BaseModel)


def read_named(path: Path, rel: str, schema: type[Named]) -> Named:
    """`path` parsed by `schema`; a CatalogError naming the file and field when it is not valid YAML, does not fit
    the schema, or its `name` is not the file's name."""
    try:
        spec = schema.model_validate(safe_load(path.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:
        raise CatalogError(rel, "(file)", f"not valid YAML: {exc}") from exc
    except ValidationError as exc:
        field, message = explain(exc, schema)
        raise CatalogError(rel, field, message) from exc
    if getattr(spec, "name", None) != path.stem:
        raise CatalogError(rel, "name", f"must equal the file name {path.stem!r}")
    return spec
