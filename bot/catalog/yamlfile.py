"""YAML as the bot reads its manifests and policies: PyYAML's safe loader, on libyaml where the wheel has it.

The pure-Python loader spent ~0.25 s of CPU on the shipped catalog (its ~60 files) every time it was
loaded; libyaml's parser builds the same safe types in ~0.04 s. PyYAML's wheels carry libyaml; a build without it
falls back to the Python loader, which reads the same documents.
"""

from __future__ import annotations

from typing import Any

import yaml

LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """The document in `text` as plain Python (`yaml.safe_load`'s types); raises yaml.YAMLError when it is not YAML."""
    return yaml.load(text, Loader=LOADER)
