"""Resident memory of `finetune-bot serve` over many commands: does it plateau?

    .venv/bin/python -m bench.memory [--commands 30000] [--every 1000] [--clients 16] [--database sqlite|postgres]

Starts `finetune-bot serve` as users run it (HTTP, its runtime with the Polyaxon gateway and watcher, a local
Polyaxon server without an agent, INFO logging to a file) and the bare Bolt app of `bench.ack`, both against
this process's Slack stand-in, then sends `--commands` signed `/finetune help` to serve from `--clients`
concurrent clients, reading serve's RSS (/proc/PID/status) every `--every` commands. The stand-in's record of
replies is cleared as it goes, so this process's own memory does not matter.

Prints the idle RSS of both apps, the curve (commands, RSS MB, KB per command since the previous point), the
growth per command over the first and the second half, and a verdict: `plateaus` when the second half grew
less than 0.2 KB per command (2 MB per 10,000), `grows` when it grew 1 KB per command or more, else
`inconclusive`. The machine's load is printed before and after.

30,000 commands by default: serve's RSS moves by ±0.5 MB from one reading to the next, and over the 5,000
commands of a 10,000-command run's second half that alone is ±0.1 KB per command, half the threshold. On
2026-12-07 one 10,000-command run said `inconclusive` (0.29 KB per command: 140.6 MB at 5,000, 142.0 at 10,000)
and a 30,000-command run of the same commit right after it read 140.7–141.7 MB from 2,000 commands to 30,000.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.ack import bench_database
from bench.ack_stack import SIGNING_SECRET, FullBot, start_bare
from bench.verdict import load

PLATEAU_KB_PER_COMMAND = 0.2
# 10 MB per 10,000 commands in the second half: still growing, whatever the first half did.
GROWING_KB_PER_COMMAND = 1.0


def rss_mb(pid: int) -> float:
    """Resident set size of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when serve's memory plateaus."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commands", type=int, default=30_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here (bench.report reads it)")
    args = parser.parse_args(argv)
    os.environ["POLYAXON_NO_CONFIG"] = "true"
    from bot.local.slack import SlackSender, SlackStandIn

    print(f"load average (1/5/15 min) before: {load()}", flush=True)
    standin = SlackStandIn().start()
    curve: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp, bench_database(args.database) as url:
        bot = FullBot(Path(tmp), base_url=standin.base_url, bot_token=standin.bot_token, watch_interval_s=2.0,
                      database_url=url)  # fmt: skip
        bare = None
        try:
            bot.start()
            bare, _ = start_bare(standin.base_url, standin.bot_token)
            time.sleep(3)  # both idle: imports done, first watcher ticks over
            assert bot.process is not None
            pid = bot.process.pid
            idle = {"serve": rss_mb(pid), "bare": rss_mb(bare.pid)}
            print(f"idle RSS: finetune-bot serve {idle['serve']:.1f} MB, bare Bolt {idle['bare']:.1f} MB")
            sender = SlackSender(bot.url, SIGNING_SECRET, standin=standin)

            def one(_: int) -> None:
                sent = sender.slash_command("help")
                if sent.status != 200:
                    raise RuntimeError(f"ack failed: HTTP {sent.status}")

            sent = 0
            curve.append((0, rss_mb(pid)))
            with ThreadPoolExecutor(args.clients) as pool:
                while sent < args.commands:
                    step = min(args.every, args.commands - sent)
                    list(pool.map(one, range(step)))
                    sent += step
                    with standin.state.lock:  # the stand-in's record of replies, not serve's memory
                        standin.state.response_url_posts.clear()
                        standin.state.calls.clear()
                    curve.append((sent, rss_mb(pid)))
                    previous = curve[-2]
                    growth = (curve[-1][1] - previous[1]) * 1024 / step
                    print(f"{sent:>7} commands  {curve[-1][1]:8.1f} MB  {growth:+6.2f} KB/command", flush=True)
        finally:
            if bare is not None:
                bare.terminate()
                bare.wait(timeout=10)
            bot.stop()
            standin.stop()
    half = len(curve) // 2
    first = (curve[half][1] - curve[0][1]) * 1024 / max(1, curve[half][0] - curve[0][0])
    second = (curve[-1][1] - curve[half][1]) * 1024 / max(1, curve[-1][0] - curve[half][0])
    if second < PLATEAU_KB_PER_COMMAND:
        verdict = "plateaus"
    elif second >= GROWING_KB_PER_COMMAND:
        verdict = "grows"
    else:
        verdict = "inconclusive"
    print(
        f"growth: first half {first:.2f} KB/command, second half {second:.2f} KB/command -> {verdict}; "
        f"load average after: {load()}"
    )
    if args.json:
        figures = {
            "database": args.database,
            "commands": args.commands,
            "idle_mb": {k: round(v, 1) for k, v in idle.items()},
            "curve": [[n, round(mb, 1)] for n, mb in curve],
            "growth_kb_per_command": {"first_half": round(first, 3), "second_half": round(second, 3)},
            "verdict": verdict,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if verdict == "plateaus" else 1


if __name__ == "__main__":
    sys.exit(main())
