"""Benchmark: `/finetune run` -> card posted and run accepted by Polyaxon, vs `polyaxon run -f` on the same op.

Measured side by side in one process against one local Polyaxon server:
- bot: a signed slash command to the real Bolt app until the run's card is in the channel AND its
  thread says Polyaxon took the run (compile, pin-gate, store, post, submit);
- gateway: `PolyaxonGateway.submit` of the compiled operation until the run is readable;
- cli: `polyaxon run -f op.json` of the same compiled operation until the run is readable (each call
  pays the client's import, as a person at a shell does).

    .venv/bin/python bench/submit.py              # 5 rounds, recipe quickstart
    .venv/bin/python bench/submit.py --rounds 10
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
os.environ.setdefault("POLYAXON_NO_CONFIG", "true")

CHANNEL = "C0TRAIN01"


def _until(predicate: object, timeout_s: float = 60.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise RuntimeError("timed out")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--recipe", default="quickstart")
    args = parser.parse_args()

    from pydantic import SecretStr

    from bot.app import build_runtime
    from bot.grammar import RunCommand
    from bot.local.polyaxon import LocalPolyaxonStack
    from bot.local.slack import SlackSender, SlackStandIn
    from bot.settings import FinetuneSettings, PolyaxonSettings, Settings, SlackSettings
    from bot.web import build_http_server
    from storage.db import make_engine
    from storage.migrate import upgrade

    signing_secret = "bench-signing-secret-0123456789ab"
    with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
        workdir = Path(tmp)
        stack = LocalPolyaxonStack(workdir / "store", workdir=REPO)
        stack.start()
        standin = SlackStandIn().start()
        url = f"sqlite:///{workdir / 'bot.db'}"
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        settings = Settings(
            slack=SlackSettings(
                bot_token=SecretStr(standin.bot_token),
                signing_secret=SecretStr(signing_secret),
                api_base_url=standin.base_url,
            ),
            # A long watcher interval: the watcher is not what is measured.
            polyaxon=PolyaxonSettings(host=stack.host, project="bench"),
            finetune=FinetuneSettings(database_url=url, catalog_dir=REPO / "manifests", watch_interval_s=3600),
        )
        runtime = build_runtime(settings)
        runtime.start()
        http = build_http_server(settings, runtime.services, "127.0.0.1", 0, app=runtime.app).start()
        sender = SlackSender(http.url, signing_secret, standin=standin)
        assert runtime.services.catalog is not None and runtime.services.gateway is not None
        gateway = runtime.services.gateway
        operation = runtime.services.catalog.plan(RunCommand(recipe=args.recipe)).operation
        opfile = workdir / "op.json"
        opfile.write_text(json.dumps(operation))
        home = workdir / "home"
        home.mkdir()
        # The CLI reads $HOME config unless NO_CONFIG, and with NO_CONFIG it ignores POLYAXON_HOST.
        cli_env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "POLYAXON_HOST": stack.host}
        cli = str(Path(sys.executable).parent / "polyaxon")
        bot_s: list[float] = []
        gateway_s: list[float] = []
        cli_s: list[float] = []
        cli_failures: list[list[str]] = []
        try:
            for i in range(args.rounds):
                cards = len(standin.messages(CHANNEL))
                t0 = time.perf_counter()
                sender.slash_command(f"run recipe={args.recipe}", channel_id=CHANNEL)

                def accepted(cards: int = cards) -> bool:
                    messages = standin.messages(CHANNEL)
                    if len(messages) <= cards:
                        return False
                    replies = standin.replies(CHANNEL, messages[-1]["ts"])
                    return any("Submitted to Polyaxon" in str(r.get("text")) for r in replies)

                _until(accepted)
                bot_s.append(time.perf_counter() - t0)

                t0 = time.perf_counter()
                info = gateway.submit(operation, name=f"bench-gw-{i}-{time.time_ns() % 10**9}", tags=["bench"])
                gateway.get_run(info.uuid)
                gateway_s.append(time.perf_counter() - t0)

                for _attempt in range(3):
                    name = f"bench-cli-{i}-{time.time_ns() % 10**9}"
                    t0 = time.perf_counter()
                    done = subprocess.run(
                        [cli, "run", "-f", str(opfile), "-p", "default/bench", "-n", name],
                        env=cli_env,
                        capture_output=True,
                        text=True,
                    )
                    if done.returncode == 0:
                        _until(lambda n=name: gateway.find_run(n) is not None)
                        cli_s.append(time.perf_counter() - t0)
                        break
                    # The local server now and then answers 405 under load; the gateway retries such
                    # answers itself, the CLI does not: count it and try again (its time is left out).
                    cli_failures.append(done.stdout.strip().splitlines()[-1:] or [f"exit {done.returncode}"])
        finally:
            http.stop()
            runtime.stop()
            standin.stop()
            stack.stop()
    bot, gw, plx = (statistics.median(x) for x in (bot_s, gateway_s, cli_s))
    print(
        json.dumps(
            {
                "rounds": args.rounds,
                "recipe": args.recipe,
                "bot_command_to_card_and_submitted_s": {"median": round(bot, 3), "all": [round(x, 3) for x in bot_s]},
                "gateway_submit_s": {"median": round(gw, 3), "all": [round(x, 3) for x in gateway_s]},
                "polyaxon_run_cli_s": {"median": round(plx, 3), "all": [round(x, 3) for x in cli_s]},
                "polyaxon_run_cli_failed_attempts": len(cli_failures),
                "ratio_bot_over_cli": round(bot / plx, 2),
                "ratio_gateway_over_cli": round(gw / plx, 2),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
