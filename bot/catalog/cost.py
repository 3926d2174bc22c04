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
# A preset's own peak (dense bf16 TFLOP/s per accelerator), over the table in pricing.yaml by GPU product.
PEAK_TFLOPS = "finetune.io/peak-tflops"
GPU_PRODUCT = "nvidia.com/gpu.product"


class PresetPrice(BaseModel):
    """One preset's prices in `pricing.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_accelerator_hour: float | None = Field(default=None, ge=0)
    per_core_hour: float | None = Field(default=None, ge=0)


class Throughput(BaseModel):
    """`throughput:` of `pricing.yaml`: how fast the presets' hardware trains, for the estimate of a recipe that was
    never measured on a preset (FLOPs of the work over these rates)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Peak dense bf16 TFLOP/s of one accelerator, by its `nvidia.com/gpu.product` (the vendors' datasheets).
    peak_tflops: dict[str, float] = Field(default_factory=dict)
    # The share of that peak a fine-tune reaches (model FLOPs utilisation): assumed, and said in every estimate.
    utilisation: float = Field(default=0.35, gt=0, le=1)
    # Training FLOP/s one CPU core reaches (effective, measured on a run: tokens/s × FLOPs per token).
    cpu_gflops_per_core: float | None = Field(default=None, gt=0)
    cpu_source: str = "pricing.yaml"


class Pricing(BaseModel):
    """`manifests/pricing.yaml`: the currency and a price per preset (all optional), and the hardware's throughput."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    presets: dict[str, PresetPrice] = Field(default_factory=dict)
    throughput: Throughput = Field(default_factory=Throughput)


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
    # Training FLOP/s of one unit (an accelerator's peak × the assumed utilisation, or a core's measured rate), and
    # where it comes from; None when the catalog does not know the hardware.
    flops_per_s: float | None = None
    flops_source: str | None = None

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
    flops, flops_source = _throughput(presets, pricing.throughput, operation, accelerators=bool(accelerators))
    return CostProfile(
        unit=unit,
        count=count,
        price=price,
        currency=pricing.currency,
        price_source=source,
        max_duration_s=max_s,
        max_duration_source=max_source,
        flops_per_s=flops,
        flops_source=flops_source,
    )


def _throughput(
    presets: Sequence[Preset], table: Throughput, operation: Mapping[str, Any], *, accelerators: bool
) -> tuple[float | None, str | None]:
    """Training FLOP/s of one unit and what says so: a preset's `finetune.io/peak-tflops`, else the GPU product its
    node selector names in pricing.yaml's table (× the assumed utilisation); a core's measured rate on CPU."""
    if not accelerators:
        if table.cpu_gflops_per_core is None:
            return None, None
        return table.cpu_gflops_per_core * 1e9, f"{table.cpu_gflops_per_core:g} GFLOP/s per core ({table.cpu_source})"
    share = f"× {table.utilisation:.0%} assumed utilisation"
    for preset in reversed(presets):
        own = [float(n[PEAK_TFLOPS]) for n in _annotations(preset.document.get("runPatch") or {}) if PEAK_TFLOPS in n]
        if own:
            return own[-1] * 1e12 * table.utilisation, f"{own[-1]:g} TFLOP/s peak (preset {preset.name}) {share}"
    for product in reversed(list(_gpu_products([p.document for p in presets] + [dict(operation)]))):
        if product in table.peak_tflops:
            peak = table.peak_tflops[product]
            return peak * 1e12 * table.utilisation, f"{peak:g} TFLOP/s peak ({product}, {PRICING_FILE}) {share}"
    return None, None


def _gpu_products(nodes: list[Any]) -> Iterator[str]:
    for node in nodes:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "nodeSelector" and isinstance(value, Mapping) and GPU_PRODUCT in value:
                    yield str(value[GPU_PRODUCT])
                else:
                    yield from _gpu_products([value])
        elif isinstance(node, list):
            yield from _gpu_products(node)
