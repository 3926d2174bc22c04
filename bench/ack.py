"""Ack latency under a burst: this app vs a bare Bolt app that only acks, in the same run.

    .venv/bin/python -m bench.ack [--burst 100] [--rounds 6]

Each app runs in its own process behind the same waitress server (as `finetune-bot serve` does);
this process plays Slack: the Web API stand-in (which receives the bot's replies) and a client
that fires `--burst` signed `/finetune help` commands at once. Bursts alternate between the two
apps (ABBA), and the next burst waits until this app's replies are all in. Prints p50/p95/p99 per
app over all bursts, the p99 ratio (pooled, and per burst) and the number of acks over 3 s.
Targets: p99 ratio <= 1.2 and no ack over 3 s.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIGNING_SECRET = "bench-signing-secret-0123456789abcdef"
ACK_DEADLINE_S = 3.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(variant: str, port: int, base_url: str, bot_token: str, workdir: Path) -> None:
    """Child process: serve one variant on 127.0.0.1:port until killed."""
    from pydantic import SecretStr
    from slack_bolt import Ack, App
    from slack_bolt.adapter.wsgi import SlackRequestHandler
    from slack_sdk import WebClient

    from bot.settings import FinetuneSettings, Settings, SlackSettings
    from bot.web import HttpServer, build_http_server, freeze_startup_heap

    if variant == "bare":
        bare = App(client=WebClient(token=bot_token, base_url=base_url), signing_secret=SIGNING_SECRET)

        @bare.command("/finetune")
        def only_ack(ack: Ack) -> None:
            ack()

        HttpServer(SlackRequestHandler(bare), "127.0.0.1", port).serve_forever()
        return

    from bot.catalog import Catalog
    from bot.services import Services
    from storage.db import SessionFactory, make_engine
    from storage.migrate import upgrade

    settings = Settings(
        slack=SlackSettings(
            bot_token=SecretStr(bot_token),
            signing_secret=SecretStr(SIGNING_SECRET),
            app_token=None,
            api_base_url=base_url,
        ),
        finetune=FinetuneSettings(database_url=f"sqlite:///{workdir / 'bench.db'}", catalog_dir=REPO / "manifests"),
    )
    engine = make_engine(settings.finetune.database_url)
    upgrade(engine)
    services = Services(sessions=SessionFactory(engine), catalog=Catalog.load(settings.finetune.catalog_dir))
    from bot.app import build_app

    server = build_http_server(settings, services, "127.0.0.1", port, app=build_app(settings, services))
    freeze_startup_heap()  # as run_serve does
    server.serve_forever()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def _burst(url: str, size: int, standin: object) -> list[float]:
    from bot.local.slack import SlackSender, SlackStandIn

    assert isinstance(standin, SlackStandIn)
    sender = SlackSender(url, SIGNING_SECRET, standin=standin)
    start = threading.Barrier(size)

    def one(_i: int) -> float:
        start.wait()
        sent = sender.slash_command("help")
        if sent.status != 200:
            raise RuntimeError(f"ack failed: HTTP {sent.status}")
        return sent.elapsed_s

    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(one, range(size)))


def _wait_replies(standin: object, count: int, timeout: float = 30.0) -> int:
    from bot.local.slack import SlackStandIn

    assert isinstance(standin, SlackStandIn)
    deadline = time.monotonic() + timeout
    while len(standin.response_url_posts()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(standin.response_url_posts())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with --serve, be one of its servers)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--burst", type=int, default=100, help="concurrent slash commands per burst")
    parser.add_argument("--rounds", type=int, default=6, help="bursts per app (alternating, ABBA order)")
    parser.add_argument("--serve", choices=["full", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.base_url, os.environ["BENCH_BOT_TOKEN"], args.workdir)
        return 0

    from bot.local.slack import SlackStandIn

    standin = SlackStandIn().start()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for variant in ("full", "bare"):
                port = _free_port()
                env = {
                    **os.environ,
                    "BENCH_BOT_TOKEN": standin.bot_token,
                    "POLYAXON_NO_CONFIG": "true",
                    "PYTHONPATH": str(REPO),
                }
                procs[variant] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.ack",
                        "--serve",
                        variant,
                        "--port",
                        str(port),
                        "--base-url",
                        standin.base_url,
                        "--workdir",
                        tmp,
                    ],
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                _wait_listening(port, procs[variant])
                urls[variant] = f"http://127.0.0.1:{port}"
            for url in urls.values():  # warm up: imports, and thread pools grown to burst size
                _burst(url, args.burst, standin)
            warmup = args.burst
            _wait_replies(standin, warmup)
            latencies: dict[str, list[float]] = {"full": [], "bare": []}
            round_ratios: list[float] = []
            for round_no in range(args.rounds):
                p99: dict[str, float] = {}
                # ABBA order cancels drift in the machine's background load.
                for variant in ("full", "bare") if round_no % 2 == 0 else ("bare", "full"):
                    values = _burst(urls[variant], args.burst, standin)
                    latencies[variant].extend(values)
                    p99[variant] = _percentile(values, 99)
                    if variant == "full":
                        # Let this app's work after the acks finish, so it cannot slow the other app's burst.
                        _wait_replies(standin, warmup + args.burst * (round_no + 1))
                    time.sleep(0.3)
                round_ratios.append(p99["full"] / p99["bare"])
            expected_replies = warmup + args.burst * args.rounds
            replies = _wait_replies(standin, expected_replies)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(timeout=10)
            standin.stop()

    print(f"ack latency, {args.rounds} bursts of {args.burst} concurrent /finetune help (ms)")
    print(f"{'app':<22}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}{'mean':>8}{'> 3 s':>7}")
    rows = {"finetune-bot": latencies["full"], "bare Bolt (ack only)": latencies["bare"]}
    for name, values in rows.items():
        over = sum(v > ACK_DEADLINE_S for v in values)
        print(
            f"{name:<22}{_percentile(values, 50) * 1e3:8.1f}{_percentile(values, 95) * 1e3:8.1f}"
            f"{_percentile(values, 99) * 1e3:8.1f}{max(values) * 1e3:8.1f}{statistics.mean(values) * 1e3:8.1f}"
            f"{over:7d}"
        )
    ratio = _percentile(latencies["full"], 99) / _percentile(latencies["bare"], 99)
    median_ratio = statistics.median(round_ratios)
    over_total = sum(v > ACK_DEADLINE_S for v in latencies["full"])
    print(
        f"p99 ratio finetune-bot / bare, all bursts pooled: {ratio:.2f}; "
        f"median of per-burst p99 ratios: {median_ratio:.2f} ({', '.join(f'{r:.2f}' for r in round_ratios)})"
    )
    print(
        f"target: p99 ratio <= 1.2 -> {'met' if ratio <= 1.2 else 'NOT met'} (pooled); "
        f"acks over 3 s: {over_total} (target 0)"
    )
    print(f"replies delivered by finetune-bot: {replies}/{expected_replies}")
    return 0 if ratio <= 1.2 and over_total == 0 and replies == expected_replies else 1


if __name__ == "__main__":
    sys.exit(main())
