"""The manifests' YAML reader: libyaml's safe loader where the wheel has it, and safe either way."""

from __future__ import annotations

from datetime import date

import pytest
import yaml

from bot.catalog import yamlfile
from bot.catalog.yamlfile import safe_load


def test_libyaml_reads_the_manifests_when_the_wheel_has_it() -> None:
    # The wheels this project pins carry libyaml; a silent fall back to the Python loader costs ~6x the CPU.
    assert yaml.__with_libyaml__
    assert yamlfile.LOADER is yaml.CSafeLoader


def test_it_builds_plain_types_and_refuses_python_objects() -> None:
    assert safe_load("a: [1, 2.5, true, null, '3']\nb: {c: 2026-12-06}\n") == {
        "a": [1, 2.5, True, None, "3"],
        "b": {"c": date(2026, 12, 6)},
    }
    with pytest.raises(yaml.YAMLError):
        safe_load("!!python/object/apply:os.system ['true']")
    with pytest.raises(yaml.YAMLError):
        safe_load("a: [1, 2\nb: 3")
