"""`torchrun ... -m trainer.commcheck --out DIR --timeout_s T`: the preflight's communication check.

Every rank writes `DIR/arrived-rank-<RANK>` as soon as it starts (so a launch that never completes still
says which ranks came up here), joins the process group (nccl with CUDA, else gloo) with a timeout of T s,
all-gathers its rank and hostname, then all-reduces float32 tensors of 4 KiB, 256 KiB and 4 MiB (a few
warm-up and `TIMED` timed iterations each). Rank 0 writes `DIR/comm.json`: `world_size`, `backend`,
`ranks_seen` ([{rank, hostname}]) and `sizes` ([{bytes, latency_ms, busbw_gbps}]): the median latency,
slowest rank, and the all-reduce bus bandwidth 2(n-1)/n × bytes / time.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from trainer.digests import write_json_atomic

SIZES = (4 << 10, 256 << 10, 4 << 20)
WARMUP = 3
TIMED = 10
COMM_FILE = "comm.json"


def bus_bandwidth_gbps(nbytes: int, seconds: float, world_size: int) -> float:
    """All-reduce bus bandwidth in GB/s: 2(n-1)/n × bytes / time (0 for one rank or no time)."""
    if world_size <= 1 or seconds <= 0:
        return 0.0
    return 2 * (world_size - 1) / world_size * nbytes / seconds / 1e9


def _time_all_reduce(nbytes: int, device: Any, world_size: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    tensor = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times = []
    for iteration in range(WARMUP + TIMED):
        sync()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        sync()
        if iteration >= WARMUP:
            times.append(time.perf_counter() - start)
    median = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(median, op=dist.ReduceOp.MAX)  # the slowest rank's median is what a step waits for
    seconds = float(median.item())
    return {
        "bytes": nbytes,
        "latency_ms": round(seconds * 1e3, 4),
        "busbw_gbps": round(bus_bandwidth_gbps(nbytes, seconds, world_size), 4),
    }


def run(out: Path, timeout_s: float) -> int:
    """Join the group, exchange ranks, time the all-reduces; rank 0 writes `comm.json`."""
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    hostname = socket.gethostname()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"arrived-rank-{rank}").write_text(hostname + "\n")
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        backend, device = "nccl", torch.device("cuda", local_rank)
    else:
        backend, device = "gloo", torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    try:
        world_size = dist.get_world_size()
        seen: list[Any] = [None] * world_size
        dist.all_gather_object(seen, {"rank": rank, "hostname": hostname})
        sizes = [_time_all_reduce(nbytes, device, world_size) for nbytes in SIZES]
        if rank == 0:
            document = {"world_size": world_size, "backend": backend, "ranks_seen": seen, "sizes": sizes}
            write_json_atomic(out / COMM_FILE, document)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse `--out` and `--timeout_s` and run the check."""
    parser = argparse.ArgumentParser(prog="python -m trainer.commcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for arrived-rank-* and comm.json")
    parser.add_argument("--timeout_s", type=float, default=60.0, help="process group timeout")
    args = parser.parse_args(argv)
    return run(args.out, args.timeout_s)


if __name__ == "__main__":
    sys.exit(main())
