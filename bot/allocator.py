"""glibc's allocator, tuned for `serve`: two arenas, fixed mmap/trim thresholds, no per-thread cache.

`serve` runs ~70 threads (request, work, intake, scheduler) that allocate under one interpreter lock. With
glibc's defaults its RSS grew with the commands it served while the Python heap (tracemalloc, pymalloc's block
count) and the live malloc'd bytes (heaptrack) stayed flat: glibc held memory freed by those threads, in up to 8
arenas per core, each at its own high-water mark, and in a cache of freed chunks per thread. Two arenas cost no
contention here (threads allocate holding the interpreter lock); the thread cache buys little, since Python's own
allocator serves every object up to 512 bytes. Nothing here applies to a C library other than glibc.
"""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Mapping
from typing import Any

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
# glibc's own initial thresholds, fixed: left alone, glibc raises them (up to 32 MiB) after the first large free
# and then keeps freed large blocks (pymalloc's 1 MiB arenas among them) in its heap instead of unmapping them.
MMAP_THRESHOLD = 128 * 1024
TRIM_THRESHOLD = 128 * 1024
# The thread cache's size is read only at start, from GLIBC_TUNABLES: `serve` re-executes itself with it.
TCACHE_TUNABLE = "glibc.malloc.tcache_count"


def is_glibc() -> bool:
    """Whether this process runs on glibc."""
    return platform.libc_ver()[0] == "glibc"


def tune_allocator(libc: Any | None = None) -> bool:
    """Cap the arenas and fix the thresholds (call it before threads start: arenas are taken per thread);
    False where the C library is not glibc or glibc refused a value."""
    if libc is None:
        if not is_glibc():
            return False
        libc = ctypes.CDLL(None)
    settings = ((M_ARENA_MAX, ARENAS), (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    # mallopt returns 1 when it took the value.
    return all([libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) == 1 for param, value in settings])


def allocator_environment(environ: Mapping[str, str], *, glibc: bool | None = None) -> dict[str, str] | None:
    """The environment to start `serve` with so that glibc keeps no per-thread cache of freed chunks; None when
    `environ` has it already (GLIBC_TUNABLES sets the cache's size, ours or the operator's) or not on glibc.

    glibc keeps up to 7 freed chunks of each size up to 1 KiB per thread, counted as in use: over serve's
    threads that cache filled slowly (malloc'd bytes grew ~0.4 KB per command between 1,000 and 6,000 commands,
    Python's heap and SQLite's memory flat); with it off RSS stayed within 0.2 MB over the same commands.
    """
    if not (is_glibc() if glibc is None else glibc):
        return None
    tunables = environ.get("GLIBC_TUNABLES", "")
    if TCACHE_TUNABLE + "=" in tunables:
        return None
    return {**environ, "GLIBC_TUNABLES": ":".join(filter(None, [tunables, f"{TCACHE_TUNABLE}=0"]))}
