"""The two apps `bench.ack` measures: `finetune-bot serve` on the local Polyaxon server, and a bare Bolt app.

The full app is the console script's own `serve` (settings from the environment, its logging, its
runtime: gateway, watcher and scheduler in the serving process), started on a local Polyaxon server
with no agent: a submitted run stays `queued` and nothing trains. The bench plays the agent only to
end runs (it reports them `stopped`, as the agent does after a stop), so the active set stays bounded.
"""

from __future__ import annotations

import collections
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SIGNING_SECRET = "bench-signing-secret-0123456789abcdef"
PROJECT = "bench-ack"
RECIPE = "sft-tiny"
# The status a run keeps on a server with no agent, once Polyaxon has compiled and queued it.
PARKED = "queued"
_LOG_LEVEL = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) (.*)$")
_NUMBER = re.compile(r"\d+")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    """Block until something accepts connections on `port`; fail if `proc` exits first."""
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


def serve_bare(port: int, base_url: str, bot_token: str) -> None:
    """Child process: a Bolt app that only acks `/finetune`, behind the same waitress server as `serve`."""
    from slack_bolt import Ack, App
    from slack_bolt.adapter.wsgi import SlackRequestHandler
    from slack_sdk import WebClient

    from bot.web import HttpServer

    bare = App(client=WebClient(token=bot_token, base_url=base_url), signing_secret=SIGNING_SECRET)

    @bare.command("/finetune")
    def only_ack(ack: Ack) -> None:
        ack()

    HttpServer(SlackRequestHandler(bare), "127.0.0.1", port).serve_forever()


def start_bare(base_url: str, bot_token: str) -> tuple[subprocess.Popen[bytes], str]:
    """The bare app in its own process (`python -m bench.ack --serve bare`); (process, url)."""
    port = free_port()
    env = {**os.environ, "BENCH_BOT_TOKEN": bot_token, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "bench.ack", "--serve", "bare", "--port", str(port), "--base-url", base_url]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc, f"http://127.0.0.1:{port}"


def build_recipe_assets() -> None:
    """Build what `sft-tiny` trains on if missing (its tiny Llama): the catalog refuses a run without it."""
    from bot.catalog import Catalog
    from bot.local.assets import RecipeAssets

    def say(line: str) -> None:
        print(f"» {line}", file=sys.stderr, flush=True)

    RecipeAssets(Catalog.load(REPO / "manifests"), say).prepare(f"run recipe={RECIPE}")


class FullBot:
    """`finetune-bot serve` (HTTP) wired to the Slack stand-in and a local Polyaxon server without an agent."""

    def __init__(
        self,
        folder: Path,
        *,
        base_url: str,
        bot_token: str,
        watch_interval_s: float,
        database_url: str | None = None,
    ) -> None:
        self.folder = folder
        self.base_url = base_url
        self.bot_token = bot_token
        self.watch_interval_s = watch_interval_s
        # A SQLite file (the default install), or a PostgreSQL database the bench empties first (--database).
        self.database_url = database_url or f"sqlite:///{folder / 'bot.db'}"
        self.log_path = folder / "serve.log"
        self.url = ""
        self._stack: Any = None
        self._gateway: Any = None
        self._engine: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        # Stops written per Polyaxon run: more than one when the first did not hold.
        self.stop_writes: collections.Counter[str] = collections.Counter()

    def start(self) -> FullBot:
        """Polyaxon server, database schema, then `python -m bot.cli serve` until it listens."""
        from bot.local.polyaxon import LocalPolyaxonStack
        from bot.polyaxon import PolyaxonGateway
        from storage.db import make_engine
        from storage.migrate import upgrade

        self._stack = LocalPolyaxonStack(self.folder / "polyaxon", workdir=REPO, agent=False).start()
        self._gateway = PolyaxonGateway(host=self._stack.host, token=None, project=PROJECT, timeout_s=30)
        self._engine = make_engine(self.database_url)
        upgrade(self._engine)  # what `finetune-bot db upgrade` does; serve refuses an unmigrated database
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "FINETUNE_", "POLYAXON_"))}
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "SLACK_BOT_TOKEN": self.bot_token,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_BASE_URL": self.base_url,
                "POLYAXON_HOST": self._stack.host,
                "POLYAXON_NO_CONFIG": "true",
                "FINETUNE_POLYAXON_PROJECT": PROJECT,
                "FINETUNE_DATABASE_URL": self.database_url,
                "FINETUNE_CATALOG_DIR": str(REPO / "manifests"),
                "FINETUNE_WATCH_INTERVAL_S": str(self.watch_interval_s),
            }
        )
        with self.log_path.open("wb") as log:
            argv = [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)]
            self._proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=log)
        wait_listening(port, self._proc)
        self.url = f"http://127.0.0.1:{port}"
        return self

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The `serve` process, once started."""
        return self._proc

    def stop(self) -> None:
        """SIGTERM serve (it finishes acked work), then stop the Polyaxon server."""
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._gateway is not None:
            self._gateway.close()
        if self._stack is not None:
            self._stack.stop()
        if self._engine is not None:
            self._engine.dispose()

    def active_runs(self) -> dict[str, tuple[str, str | None]]:
        """The runs the bot holds active: name -> (status, Polyaxon uuid)."""
        from storage import repos
        from storage.db import SessionFactory

        with SessionFactory(self._engine)() as s:
            return {run.name: (run.status, run.polyaxon_uuid) for run in repos.list_active_runs(s)}

    def run_statuses(self) -> collections.Counter[str]:
        """How many runs the bot recorded, by status."""
        from storage import repos
        from storage.db import SessionFactory

        with SessionFactory(self._engine)() as s:
            return collections.Counter(run.status for run in repos.list_recent_runs(s, limit=1_000_000))

    def polyaxon_status(self, uuid: str) -> str:
        """The run's status as Polyaxon has it."""
        return str(self._gateway.get_run(uuid, with_conditions=False).status)

    def end_runs(self, uuids: set[str]) -> None:
        """Report each run not yet done in Polyaxon as stopped, as the agent does after a stop.

        Status writes to the sandbox are fire-and-forget (a few percent get lost), and one written while the
        server is still queueing a fresh run can be overwritten by `queued`: callers repeat until it holds.
        """
        from polyaxon.client import RunClient

        from bot.polyaxon import DONE_STATUSES

        client = self._gateway._client  # the bench talks to Polyaxon as the agent does, not through the bot
        for uuid in uuids:
            if self.polyaxon_status(uuid) not in DONE_STATUSES:
                run = RunClient(owner="default", project=PROJECT, run_uuid=uuid, client=client)
                run.log_status("stopped", reason="BenchEnded", message="ended by bench.ack")
                self.stop_writes[uuid] += 1

    def wait_quiet(self, *, window_s: float = 0.2, busy: float = 0.1, timeout_s: float = 15.0) -> float:
        """Wait until serve used under `busy` of a core over a `window_s` window: the work of the last burst (its
        replies, the watcher telling its runs) is over, so the next burst meets serve as idle as the bare app.
        A watcher tick still falls into bursts at random. Returns the seconds waited (`timeout_s` at most)."""
        assert self._proc is not None
        started = time.monotonic()
        stat = Path(f"/proc/{self._proc.pid}/stat")
        ticks = os.sysconf("SC_CLK_TCK")

        def used() -> float:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

        before = used()
        while time.monotonic() - started < timeout_s:
            time.sleep(window_s)
            now = used()
            if now - before < busy * window_s:
                break
            before = now
        return time.monotonic() - started

    def settle(self, standing: set[str], ignore: set[str], timeout_s: float = 30.0) -> set[str]:
        """End every active run but `standing` and wait until the bot holds only those, each parked.

        Returns the runs the watcher did not tell in time, for the caller to leave out of later waits (`ignore`).
        """
        deadline = time.monotonic() + timeout_s
        next_end = 0.0
        while True:
            active = self.active_runs()
            told = {name for name, (status, _) in active.items() if name in standing and status == PARKED}
            unsettled = set(active) - told - ignore
            now = time.monotonic()
            if not unsettled or now > deadline:
                return unsettled
            if now >= next_end:  # the watcher reads the stops at its next tick: repeat only those that did not hold
                self.end_runs({uuid for name, (_, uuid) in active.items() if name in unsettled - standing and uuid})
                next_end = now + 2.0
            time.sleep(0.25)

    def describe(self, names: set[str]) -> list[str]:
        """`name: the bot says S, Polyaxon says P` for each run."""
        active = self.active_runs()
        lines = []
        for name in sorted(names):
            status, uuid = active.get(name, ("ended", None))
            remote = self.polyaxon_status(uuid) if uuid else "nothing (not submitted)"
            lines.append(f"{name}: the bot says {status}, Polyaxon says {remote}")
        return lines

    def log_summary(self) -> tuple[int, collections.Counter[str]]:
        """Lines serve logged; its warning/error messages (timestamps dropped, numbers as N) with their counts."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        problems: collections.Counter[str] = collections.Counter()
        for line in lines:
            if match := _LOG_LEVEL.match(line):
                # Numbers differ from line to line (queue depths, sizes): one entry per message shape.
                problems[f"{match.group(1)} {_NUMBER.sub('N', match.group(2))[:140]}"] += 1
        return len(lines), problems

    def own_ack_times(self, kind: str = "command") -> tuple[int, dict[float, float]]:
        """serve's own timing of its acks, front door to answer, from its /metrics histogram: (acks, {q: the
        upper bound of the bucket that holds the q-th percentile}) for q in 50 and 99."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        buckets: list[tuple[float, float]] = []
        for family in text_string_to_metric_families(text):
            if family.name == "finetune_bot_slack_ack_latency_seconds":
                buckets = sorted(
                    (float(sample.labels["le"]), sample.value)
                    for sample in family.samples
                    if sample.name.endswith("_bucket") and sample.labels.get("kind") == kind
                )
        total = buckets[-1][1] if buckets else 0.0
        bounds = {q: next(le for le, seen in buckets if seen >= total * q / 100) for q in (50.0, 99.0)} if total else {}
        return int(total), bounds
