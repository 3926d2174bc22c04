"""Builds a digest runtime against a database and the Slack stand-in (used in-process and by replicas)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import SecretStr
from slack_sdk import WebClient

from bot.digest import DigestRuntime
from bot.scheduler import build_scheduler, stop_scheduler
from bot.settings import FinetuneSettings, Settings, SlackSettings
from storage.db import SessionFactory, make_engine


def build_runtime(
    database_url: str, base_url: str, token: str, *, clock: Callable[[], datetime] | None = None
) -> DigestRuntime:
    """A runtime with its own engine and (not yet started) scheduler."""
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(token), api_base_url=base_url),
        finetune=FinetuneSettings(database_url=database_url, approvers=["U0BOB0001", "U0CAROL01"], approval_quorum=2),
    )
    engine = make_engine(database_url)
    return DigestRuntime(
        settings=settings,
        sessions=SessionFactory(engine),
        client=WebClient(token=token, base_url=base_url),
        scheduler=build_scheduler(settings, engine),
        clock=clock or (lambda: datetime.now(UTC)),
    )


def main(argv: list[str]) -> int:
    """A replica: start scheduler + runtime, serve for a few seconds, stop."""
    database_url, base_url, token, seconds = argv[0], argv[1], argv[2], float(argv[3])
    runtime = build_runtime(database_url, base_url, token)
    runtime.scheduler.start(paused=True)
    runtime.start()
    runtime.scheduler.resume()
    time.sleep(seconds)
    stop_scheduler(runtime.scheduler)
    runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
