"""Benchmark: wall time from "submit" to "run visible in the API", PolyaxonGateway vs `polyaxon run -f`.

Both submit the same component to the same server. The gateway lives in a long-running process
(the bot), so it pays the Polyaxon client import once; each `polyaxon run -f` pays it every time.

    .venv/bin/python bench/polyaxon_submit.py            # starts a local stack in a temp folder
    .venv/bin/python bench/polyaxon_submit.py --host http://127.0.0.1:8000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

COMPONENT = {
    "version": 1.1,
    "kind": "component",
    "name": "bench",
    "run": {"kind": "job", "container": {"image": "ignored-locally", "command": ["python", "-c", "print('bench')"]}},
}


def _wait_visible(gateway: object, name: str, timeout_s: float = 60.0) -> None:
    from bot.polyaxon import PolyaxonGateway

    assert isinstance(gateway, PolyaxonGateway)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if gateway.find_run(name) is not None:
            return
        time.sleep(0.02)
    raise RuntimeError(f"run {name} never became visible")


def bench(host: str, runs: int, workdir: Path) -> dict[str, object]:
    """Time `runs` submissions each way; return the figures."""
    os.environ["POLYAXON_NO_CONFIG"] = "true"
    started = time.perf_counter()
    from bot.polyaxon import PolyaxonGateway

    gateway = PolyaxonGateway(host=host, token=None, project="finetune")
    gateway.ensure_project()
    gateway_setup_s = time.perf_counter() - started
    operation = {"version": 1.1, "kind": "operation", "component": COMPONENT}
    polyaxonfile = workdir / "bench.json"
    polyaxonfile.write_text(json.dumps(COMPONENT))
    # The CLI reads $HOME config unless NO_CONFIG, and with NO_CONFIG it ignores POLYAXON_HOST:
    # give it a clean HOME and the host in the environment, as a user shell would.
    cli_env = {"PATH": os.environ.get("PATH", ""), "HOME": str(workdir / "home"), "POLYAXON_HOST": host}
    (workdir / "home").mkdir(exist_ok=True)
    polyaxon_cli = str(Path(sys.executable).parent / "polyaxon")
    stamp = time.time_ns() % 10**9

    gateway_s: list[float] = []
    cli_s: list[float] = []
    for i in range(runs):
        name = f"bench-gw-{stamp}-{i}"
        t0 = time.perf_counter()
        run = gateway.submit(operation, name=name, tags=["bench"])
        gateway.get_run(run.uuid, with_conditions=False)
        gateway_s.append(time.perf_counter() - t0)

        name = f"bench-cli-{stamp}-{i}"
        t0 = time.perf_counter()
        subprocess.run(
            [polyaxon_cli, "run", "-f", str(polyaxonfile), "-p", "default/finetune", "-n", name],
            env=cli_env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_visible(gateway, name)
        cli_s.append(time.perf_counter() - t0)
    gateway.close()
    gw_median = statistics.median(gateway_s)
    cli_median = statistics.median(cli_s)
    return {
        "runs": runs,
        "gateway_setup_s (import + client, once per process)": round(gateway_setup_s, 2),
        "gateway_submit_to_visible_s": {"median": round(gw_median, 3), "all": [round(x, 3) for x in gateway_s]},
        "cli_submit_to_visible_s": {"median": round(cli_median, 3), "all": [round(x, 3) for x in cli_s]},
        "ratio_cli_over_gateway": round(cli_median / gw_median, 1),
    }


def main() -> int:
    """Parse arguments, start a stack when no host is given, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", help="an existing Polyaxon API (default: start a local stack)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plx-bench-") as tmp:
        workdir = Path(tmp)
        if args.host:
            figures = bench(args.host, args.runs, workdir)
        else:
            from bot.local.polyaxon import LocalPolyaxonStack

            with LocalPolyaxonStack(workdir / "store", workdir=REPO) as stack:
                figures = bench(stack.host, args.runs, workdir)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
