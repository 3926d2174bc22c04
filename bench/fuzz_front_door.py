"""Fuzz the front door with signed `/finetune` commands and count the ones that end in an internal error.

    .venv/bin/python -m bench.fuzz_front_door [--n 10000] [--seed 15] [--concurrency 8] [--timeout 900]

Builds the real app (`build_app`, the repository's catalog, a migrated SQLite file, no Polyaxon: the
run-lifecycle commands answer "not available"), serves it over HTTP on 127.0.0.1 (waitress, as `serve`
does) against the local Slack stand-in, and sends N signed slash commands whose text is a random mix
of the grammar's words, keys and values, quotes, unicode, shell characters and long tokens. Counts:
acks other than 200, ":warning: Something went wrong" replies, `finetune_bot_listener_errors_total`,
and replies that never came. Loopback only; the run is bounded by --timeout. Target: 0 internal errors.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SIGNING_SECRET = "fuzz-signing-secret-0123456789abcdef"
INTERNAL_ERROR = "Something went wrong"

SUBCOMMANDS = ["run", "status", "logs", "compare", "stop", "resume", "register", "recipes", "presets", "digest",
               "trace", "help", "RUN", "Run", "rnu", "stauts", "halp", "", "ｒｕｎ", "run\u200b"]  # fmt: skip
KEYS = ["recipe", "preset", "presets", "lr", "seed", "max_steps", "epochs", "batch_size", "max_length",
        "warmup_ratio", "scheduler", "save_steps", "logging_steps", "lines", "metric", "checkpoint", "model",
        "image", "gpu", "cpu", "memory", "node_selector", "resources.limits.cpu", "learning_rate", "learning_rat",
        "resume_from", "component", "LR", "Recipe", "tz", "at", "time", "k" * 300, "", "a.b.c",
        "__class__"]  # fmt: skip
VALUES = ["sft-tiny", "quickstart", "sft-lora", "SFT-TINY", "sft_tiny", "nope", "cpu-small", "gpu-1x", "spot",
          "cpu-small,spot", "gpu-1x,gpu-8x", ",", "1", "0", "-1", "1e3", "2e-5", "1.5", "nan", "inf", "-inf",
          "1e309", "9" * 60, "0x10", "1_000", "", "true", "latest", "step-10", "step--1", "step-", "daily",
          "weekly", "off", "now", "09:00", "25:61", "Europe/Paris", "Mars/Olympus", "../../etc/passwd",
          "tiny-chat:v1", "tiny-chat:v", ":v1", "sft-tiny-3f2a", "eval_loss", "loss", "v" * 500, "payload",
          "payload=[]", "command=/x"]  # fmt: skip
QUOTES = ['"', "'", "\u201c", "\u201d", "\u2018", "\u2019", '"unterminated', "'a b'", '"a=b"', "\u201ca b\u201d",
          "`", '""', "''"]  # fmt: skip
UNICODE = ["é", "ß", "İ", "ﬁ", "🚀", "👩\u200d👩\u200d👧", "\u202e", "\u200b", "e\u0301", "\x00", "\x1b[31m", "\r",
           "\n", "\t", "\ufeff", "\U0010ffff", "\u2028", "Ω", "日本語", "\u00a0", "\x7f", "\ufffd"]  # fmt: skip
SHELL = ["$(rm -rf /)", "`id`", "; ls", "| cat", "&& echo", "> /tmp/x", "$HOME", "${IFS}", "*", "~", "\\",
         "%s%n", "{{7*7}}", "<script>", "<@U0BOB0001>", "<!channel>", "<#C0TRAIN01>", "@here", "%00", "%",
         "&", "=", "+", "#", "?x=1&y=2"]  # fmt: skip
FLAGS = ["--dry-run", "--force", "--exploratory", "--help", "-", "--", "--unknown", "\u2014dry-run", "\u2013force",
         "-dry-run", "--DRY-RUN"]  # fmt: skip
# Commands that parse, each with a slot or two for a fuzzed token, so the fuzz also reaches past the parser.
TEMPLATES = ["run recipe={recipe} {override} --dry-run", "run recipe={recipe} preset={preset} {override} --dry-run",
             "run recipe={recipe} {override} {override} {token} --dry-run", "run recipe={recipe} {token}",
             "help {token}", "recipes {token}", "presets", "digest daily at={token}", "digest weekly tz={token}",
             "status {token}", "logs {token} lines={token}", "compare {token} {token} metric={token}",
             "register {token} model={token}", "trace {token}", "resume {token} checkpoint={token}",
             "stop {token}", "run recipe={token} --dry-run", "run {override} recipe={recipe} --dry-run"]  # fmt: skip
RECIPES = ["sft-tiny", "quickstart", "sft-lora", "sft-smollm2-135m", "sft-qwen-0p5b-lora", "explore-qwen-0p5b",
           "sft-llama31-8b-lora", "sft-qwen-1p5b-ddp", "axolotl-qwen-7b-lora"]  # fmt: skip
PRESETS = ["cpu-small", "cpu-large", "gpu-1x", "gpu-8x", "spot", "s3-checkpoints", "ddp-2x8", "cpu-small,spot",
           "gpu-1x,s3-checkpoints", "cpu-small,cpu-large"]  # fmt: skip
OVERRIDES = ["lr=2e-5", "lr=1", "lr=0", "lr=-1", "epochs=1", "epochs=0", "max_steps=10", "max_steps=1.5",
             "max_steps=99999999999", "batch_size=8", "batch_size=0", "max_length=512", "warmup_ratio=0.1",
             "warmup_ratio=2", "scheduler=cosine", "scheduler=nope", "seed=1e3", "seed=42", "save_steps=5",
             "logging_steps=1", "lora_r=8", "gpu=1"]  # fmt: skip
SEPARATORS = [" ", " ", " ", "  ", "\t", "\n", " \u00a0", "\u3000"]


def fuzz_texts(n: int, seed: int = 15) -> list[str]:
    """N command texts, reproducible from `seed`."""
    rng = random.Random(seed)
    return [_text(rng) for _ in range(n)]


def _token(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return f"{rng.choice(KEYS)}={rng.choice(VALUES)}"
    if roll < 0.45:
        return rng.choice(["{k}=", "={v}", "{k}=={v}", "{k}={v}={v}", "{k}.{k}={v}", "{k}"]).format(
            k=rng.choice(KEYS), v=rng.choice(VALUES)
        )
    if roll < 0.55:
        return rng.choice(VALUES)
    if roll < 0.63:
        return rng.choice(FLAGS)
    if roll < 0.73:
        return rng.choice(QUOTES) + rng.choice(KEYS + VALUES) + rng.choice([*QUOTES, ""])
    if roll < 0.83:
        return rng.choice(KEYS + VALUES) + rng.choice(UNICODE) + rng.choice([*KEYS, *VALUES, ""])
    if roll < 0.93:
        return rng.choice(SHELL) + rng.choice(["", rng.choice(VALUES)])
    if roll < 0.97:
        return rng.choice("ax=é\"'🚀") * rng.choice([100, 1000, 2001, 5000])
    # Any code point but the surrogates (no UTF-8 for them, so Slack never sends them).
    return "".join(chr(rng.choice([rng.randrange(0x20, 0xD800), rng.randrange(0xE000, 0x110000)])) for _ in range(8))


def _text(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(TEMPLATES).format_map(_Slots(rng))
    words = [rng.choice(SUBCOMMANDS)] if rng.random() < 0.8 else []
    words += [_token(rng) for _ in range(rng.randrange(0, 9))]
    text = "".join(word + rng.choice(SEPARATORS) for word in words)
    return text.strip() if rng.random() < 0.8 else text


class _Slots(dict[str, str]):
    """Template slots, filled afresh at each use."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, slot: str) -> str:
        rng = self.rng
        choices = {"recipe": RECIPES, "preset": PRESETS, "override": OVERRIDES}.get(slot, VALUES)
        if rng.random() < (0.5 if slot == "token" else 0.2):  # a fuzzed token where a plain word belongs
            return _token(rng)
        return rng.choice(choices)


def run(n: int, seed: int, concurrency: int, timeout_s: float) -> dict[str, Any]:
    """Serve the app, send N fuzzed signed commands, wait for every reply; the counts."""
    from pydantic import SecretStr

    from bot.app import build_app
    from bot.catalog import Catalog
    from bot.local.slack import SlackSender, SlackStandIn
    from bot.services import Services
    from bot.settings import FinetuneSettings, Settings, SlackSettings
    from bot.web import build_http_server
    from storage.db import SessionFactory, make_engine
    from storage.migrate import upgrade

    texts = fuzz_texts(n, seed)
    standin = SlackStandIn().start()
    workdir = Path(tempfile.mkdtemp(prefix="fuzz-front-door-"))
    settings = Settings(
        slack=SlackSettings(
            bot_token=SecretStr(standin.bot_token),
            signing_secret=SecretStr(SIGNING_SECRET),
            api_base_url=standin.base_url,
        ),
        finetune=FinetuneSettings(database_url=f"sqlite:///{workdir / 'fuzz.db'}", catalog_dir=REPO / "manifests"),
    )
    engine = make_engine(settings.finetune.database_url)
    upgrade(engine)
    services = Services(sessions=SessionFactory(engine), catalog=Catalog.load(settings.finetune.catalog_dir))
    http = build_http_server(settings, services, "127.0.0.1", 0, app=build_app(settings, services)).start()
    sender = SlackSender(http.url, SIGNING_SECRET, standin=standin)
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            statuses = Counter(pool.map(lambda text: sender.slash_command(text).status, texts))
        deadline = time.monotonic() + timeout_s
        while len(standin.response_url_posts()) < statuses[200] and time.monotonic() < deadline:
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        posts = standin.response_url_posts()
        errors = services.metrics.registry.get_sample_value("finetune_bot_listener_errors_total", {"kind": "command"})
        return {
            "commands": n,
            "acks": dict(statuses),
            "replies": len(posts),
            "internal_error_replies": sum(INTERNAL_ERROR in str(p["payload"].get("text", "")) for p in posts),
            "listener_errors": int(errors or 0),
            "missing_replies": statuses[200] - len(posts),
            "reply_kinds": dict(Counter(_reply_kind(p["payload"]) for p in posts).most_common()),
            "seconds": round(elapsed, 1),
        }
    finally:
        http.stop()
        services.work.shutdown()
        engine.dispose()
        standin.stop()


def _reply_kind(payload: dict[str, Any]) -> str:
    text = str(payload.get("text", ""))
    for prefix, kind in ((":x:", "refused"), (":construction:", "not available"), (":warning:", "internal error")):
        if text.startswith(prefix):
            return kind
    return "answered"


def main(argv: list[str] | None = None) -> int:
    """Run and print the figure; exit 1 when any command ended in an internal error."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="fuzzed commands to send")
    parser.add_argument("--seed", type=int, default=15, help="random seed (the same seed, the same texts)")
    parser.add_argument("--concurrency", type=int, default=8, help="commands in flight at once")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the replies")
    args = parser.parse_args(argv)
    result = run(args.n, args.seed, args.concurrency, args.timeout)
    for name, value in result.items():
        print(f"{name}: {value}")
    bad = result["internal_error_replies"] + result["listener_errors"] + result["missing_replies"]
    bad += sum(count for status, count in result["acks"].items() if status != 200)
    print(f"internal errors: {result['internal_error_replies'] + result['listener_errors']} in {args.n} commands, "
          f"{result['seconds']} s")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
