"""What a run costs per hour of running: accelerators (or CPU cores) held, and the price where one is set. Pure.

Units are accelerator-hours: accelerators per replica × replicas × hours in `running`. A preset with no
accelerator counts core-hours instead (CPU requests × replicas). Money appears only where the platform set a
price: a preset's `finetune.io/price-per-gpu-hour` / `finetune.io/price-per-core-hour` annotation, else its
entry in `manifests/pricing.yaml` (the platform team's file). A preset's `maxDuration` (or Polyaxon's
`termination.timeout`) bounds a run when no run was measured yet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.catalog.errors import CatalogError
from bot.catalog.manifests import Preset
from bot.catalog.policy import duration_s
from bot.catalog.yamlfile import safe_load

PRICE_PER_GPU_HOUR = "finetune.io/price-per-gpu-hour"
PRICE_PER_CORE_HOUR = "finetune.io/price-per-core-hour"
PRICING_FILE = "pricing.yaml"


class PresetPrice(BaseModel):
    """One preset's prices in `pricing.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_accelerator_hour: float | None = Field(default=None, ge=0)
    per_core_hour: float | None = Field(default=None, ge=0)


class Pricing(BaseModel):
    """`manifests/pricing.yaml`: the currency and a price per preset (all optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    presets: dict[str, PresetPrice] = Field(default_factory=dict)


def load_pricing(root: Path, presets: Mapping[str, Preset]) -> Pricing:
    """The catalog's pricing file, or no prices; CatalogError for a malformed file or an unknown preset."""
    path = root / PRICING_FILE
    if not path.is_file():
        return Pricing()
    try:
        pricing = Pricing.model_validate(safe_load(path.read_text()) or {})
    except (yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(PRICING_FILE, "", str(exc).splitlines()[0]) from exc
    unknown = sorted(set(pricing.presets) - set(presets))
    if unknown:
        raise CatalogError(PRICING_FILE, f"presets.{unknown[0]}", "no such preset")
    return pricing


class CostProfile(BaseModel):
    """What a run holds while it runs, what an hour of it costs, and how long it may run."""

    model_config = ConfigDict(frozen=True)

    unit: Literal["accelerator", "core"]
    count: float  # accelerators (or cores) held while running: per replica × replicas
    price: float | None = None  # per unit-hour
    currency: str = "USD"
    price_source: str | None = None
    max_duration_s: float | None = None
    max_duration_source: str | None = None

    @property
    def unit_hours(self) -> str:
        """`accelerator-hours` or `core-hours`."""
        return f"{self.unit}-hours"

    def money(self, hours: float) -> str | None:
        """`12.40 USD` for `hours` unit-hours, or None without a price."""
        return None if self.price is None else f"{hours * self.price:,.2f} {self.currency}"


def _annotations(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "annotations" and isinstance(value, Mapping):
                yield value
            else:
                yield from _annotations(value)
    elif isinstance(node, list):
        for item in node:
            yield from _annotations(item)


def _cores(resources: Mapping[str, Any]) -> float:
    requests = resources.get("requests") or {}
    raw = str(requests.get("cpu") or (resources.get("limits") or {}).get("cpu") or "1")
    cores = float(raw[:-1]) / 1000 if raw.endswith("m") else float(raw)
    return cores * int(resources.get("replicas") or 1)


def cost_profile(
    resources: Mapping[str, Any], presets: Sequence[Preset], pricing: Pricing, operation: Mapping[str, Any]
) -> CostProfile:
    """The cost profile of a compiled run: its merged resources, its presets (in order) and the catalog's prices."""
    accelerators = int(resources.get("gpus_total") or 0)
    unit: Literal["accelerator", "core"] = "accelerator" if accelerators else "core"
    count = float(accelerators) if accelerators else _cores(resources)
    annotation = PRICE_PER_GPU_HOUR if accelerators else PRICE_PER_CORE_HOUR
    price: float | None = None
    source: str | None = None
    for preset in presets:  # the last preset that prices it wins, as the last preset's settings do
        own = [
            float(notes[annotation])
            for notes in _annotations(preset.document.get("runPatch") or {})
            if annotation in notes
        ]
        listed = pricing.presets.get(preset.name)
        value = None if listed is None else (listed.per_accelerator_hour if accelerators else listed.per_core_hour)
        if own:  # the preset's own annotation wins over its entry in pricing.yaml
            price, source = own[-1], f"preset {preset.name}"
        elif value is not None:
            price, source = value, f"{PRICING_FILE} ({preset.name})"
    max_s: float | None = None
    max_source: str | None = None
    for preset in presets:
        if preset.max_duration is not None:
            max_s, max_source = duration_s(preset.max_duration), f"preset {preset.name} maxDuration"
    timeout = (operation.get("termination") or {}).get("timeout")
    if max_s is None and timeout:
        max_s, max_source = float(timeout), "termination.timeout"
    return CostProfile(
        unit=unit,
        count=count,
        price=price,
        currency=pricing.currency,
        price_source=source,
        max_duration_s=max_s,
        max_duration_source=max_source,
    )
