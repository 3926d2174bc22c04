"""How a stored digest job finds the live runtime of this process.

APScheduler's persistent job store can hold only an importable function and picklable arguments, so a
stored job names its runtime by key and finds it here. One entry per running bot process ("default").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.digest.service import DigestRuntime

_RUNTIMES: dict[str, DigestRuntime] = {}


def attach(runtime: DigestRuntime) -> None:
    """Make `runtime` the one stored jobs with its key reach."""
    _RUNTIMES[runtime.key] = runtime


def detach(runtime: DigestRuntime) -> None:
    """Forget `runtime` (when it is still the attached one)."""
    if _RUNTIMES.get(runtime.key) is runtime:
        del _RUNTIMES[runtime.key]


def digest_job(runtime_key: str, channel: str) -> None:
    """The stored job's entry point: post the channel's due digest through the live runtime."""
    runtime = _RUNTIMES.get(runtime_key)
    if runtime is None:
        raise RuntimeError(f"no digest runtime {runtime_key!r} in this process")
    runtime.post_scheduled(channel)
