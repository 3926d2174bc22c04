"""A whole bot for end-to-end tests: signed HTTP -> Bolt -> gateway -> local Polyaxon -> trainer -> watcher -> stand-in.

The bot is built by the same composition root as `serve` (`build_runtime`), against the session's local
Polyaxon stack and a fresh Slack stand-in; only the watcher interval is shortened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.app import Runtime, build_runtime
from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.settings import FinetuneSettings, PolyaxonSettings, Settings, SlackSettings
from bot.web import HttpServer, build_http_server
from storage import repos
from storage.db import make_engine
from storage.models import Run
from tests.fixtures import polyaxon as plx
from tests.fixtures.db import migrate
from tests.fixtures.slack import wait_for

polyaxon_stack = plx.polyaxon_stack

REPO = Path(__file__).resolve().parents[2]
SIGNING_SECRET = "e2e-signing-secret-" + "0" * 16
CHANNEL = DEFAULT_CHANNEL  # #ml-training, the bot is a member
ALICE = "U0ALICE01"  # requester
BOB = "U0BOB0001"  # approver


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny Llama sft-tiny loads by path (built once; the local agent runs jobs in the repository)."""
    model = REPO / ".finetune" / "models" / "tiny-llama"
    if not (model / "config.json").is_file():
        build = [sys.executable, "-m", "trainer.tiny_model", str(model.relative_to(REPO))]
        subprocess.run(build, cwd=REPO, check=True, timeout=300)
    return model


def e2e_settings(standin: SlackStandIn, host: str, database_url: str, project: str) -> Settings:
    """Settings of a bot wired to the stand-in and the local Polyaxon stack."""
    return Settings(
        slack=SlackSettings(
            bot_token=SecretStr(standin.bot_token),
            signing_secret=SecretStr(SIGNING_SECRET),
            api_base_url=standin.base_url,
        ),
        polyaxon=PolyaxonSettings(host=host, project=project),
        finetune=FinetuneSettings(
            database_url=database_url,
            catalog_dir=REPO / "manifests",
            approvers=[BOB],
            watch_interval_s=1.0,
            stuck_after_s=600.0,
        ),
    )


def serve_env(standin: SlackStandIn, polyaxon_host: str, database_url: str, project: str) -> dict[str, str]:
    """The environment of a `finetune-bot serve` process wired to the stand-in and the local stack."""
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": standin.bot_token,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_BASE_URL": standin.base_url,
        "POLYAXON_HOST": polyaxon_host,
        "POLYAXON_NO_CONFIG": "true",
        "FINETUNE_POLYAXON_PROJECT": project,
        "FINETUNE_DATABASE_URL": database_url,
        "FINETUNE_CATALOG_DIR": str(REPO / "manifests"),
        "FINETUNE_WATCH_INTERVAL_S": "1",
        # A process killed with SIGKILL cannot release the watcher lease: its successor waits out the ttl.
        "FINETUNE_WATCH_LEASE_TTL_S": "3",
    }
    env.pop("SLACK_APP_TOKEN", None)  # HTTP mode: the sender posts signed requests
    return env


@dataclass
class LiveBot:
    """The running bot and what a test needs to drive and inspect it."""

    runtime: Runtime
    http: HttpServer
    standin: SlackStandIn
    sender: SlackSender

    def command(self, text: str, *, user: str = ALICE) -> dict[str, Any]:
        """Send `/finetune TEXT` and return the ephemeral reply posted to its response_url."""
        before = len(self.standin.response_url_posts(CHANNEL))
        sent = self.sender.slash_command(text, user_id=user, channel_id=CHANNEL)
        assert sent.status == 200, sent.body
        posts = wait_for(lambda: self.standin.response_url_posts(CHANNEL)[before:] or None, timeout=60)
        return dict(posts[0]["payload"])

    def approve(self, ts: str, user: str, reaction: str = "white_check_mark") -> None:
        """`user` reacts with `reaction` on message `ts` in Slack (the stand-in), and Slack tells the bot."""
        self.standin.react_as_user(user, CHANNEL, ts, reaction)
        sent = self.sender.reaction("reaction_added", user=user, channel=CHANNEL, ts=ts, reaction=reaction)
        assert sent.status == 200, sent.body

    def wait_registered(self, model: str, versions: list[str], timeout: float = 60) -> None:
        """Until the model's registered versions are `versions`."""

        def registered() -> bool:
            with self.runtime.services.sessions() as s:
                return [r.version for r in repos.list_registrations(s, model=model)] == versions

        assert wait_for(registered, timeout=timeout), (model, versions)

    def run_named(self, name: str) -> Run:
        """The run row by name."""
        with self.runtime.services.sessions() as s:
            run = repos.get_run_by_name(s, name=name)
        assert run is not None, name
        return run

    def newest_run(self) -> Run:
        """The most recently created run."""
        with self.runtime.services.sessions() as s:
            [run] = repos.list_recent_runs(s, limit=1)
        return run

    def wait_status(self, name: str, statuses: set[str], timeout: float = 240) -> Run:
        """Wait until the bot has recorded one of `statuses` for the run and told it in the run's thread: a status
        is recorded before its post goes out, so a test that reads the thread right after must wait for both."""

        def told() -> Run | None:
            run = self.run_named(name)
            if run.status not in statuses:
                return None
            with self.runtime.services.sessions() as s:
                events = repos.list_status_events(s, run_id=run.id or 0)
            return run if run.thread_ts is None or all(e.posted_ts for e in events) else None

        return wait_for(told, timeout=timeout, interval=0.5)

    def card(self, run: Run) -> dict[str, Any]:
        """The run's card as Slack holds it."""
        assert run.card_ts is not None
        return self.standin.message(CHANNEL, run.card_ts)

    def wait_card(self, run: Run, *needles: str, timeout: float = 60) -> dict[str, Any]:
        """The card once it shows every needle: the status is recorded before the card is edited, so a
        test that has seen the status in the database may still read the card's previous edit."""

        def shown() -> dict[str, Any] | None:
            card = self.card(run)
            text = str(card.get("text")) + str(card.get("blocks"))
            return card if all(n in text for n in needles) else None

        return wait_for(shown, timeout=timeout, interval=0.25)

    def thread(self, run: Run) -> list[str]:
        """Texts of the card's thread replies."""
        assert run.card_ts is not None
        return [str(m.get("text") or "") for m in self.standin.replies(CHANNEL, run.card_ts)]


def reply_text(reply: dict[str, Any]) -> str:
    """Every text of an ephemeral reply (fallback and blocks)."""
    parts = [str(reply.get("text") or "")]
    for block in reply.get("blocks") or []:
        text = block.get("text")
        if isinstance(text, dict):
            parts.append(str(text.get("text") or ""))
        for element in block.get("elements") or []:
            if isinstance(element, dict) and "text" in element:
                t = element["text"]
                parts.append(str(t.get("text") if isinstance(t, dict) else t))
    return "\n".join(parts)


@contextmanager
def start_live_bot(
    polyaxon_stack: LocalPolyaxonStack,
    folder: Path,
    *,
    approvers: list[str] | None = None,
    catalog_dir: Path | None = None,
    finetune: dict[str, Any] | None = None,
    polyaxon_host: str | None = None,
) -> Iterator[LiveBot]:
    """A bot with its own stand-in, database and Polyaxon project, built as `serve` builds it; stopped after.

    `catalog_dir` replaces the shipped catalog (a test's own recipes; paths in it are relative to its parent);
    `finetune` sets more of the bot's own settings; `polyaxon_host` puts something (a counting proxy) between the bot
    and the stack.
    """
    standin = SlackStandIn().start()
    url = f"sqlite:///{folder / 'bot.db'}"
    engine = make_engine(url)
    migrate(engine)
    engine.dispose()
    host = polyaxon_host or polyaxon_stack.host
    settings = e2e_settings(standin, host, url, project=f"e2e-{uuid.uuid4().hex[:8]}")
    if catalog_dir is not None:
        settings = settings.model_copy(
            update={"finetune": settings.finetune.model_copy(update={"catalog_dir": catalog_dir})}
        )
    if approvers is not None:
        settings = settings.model_copy(
            update={"finetune": settings.finetune.model_copy(update={"approvers": approvers})}
        )
    if finetune:  # more FINETUNE_* settings (the release webhook's URL and secret)
        settings = settings.model_copy(update={"finetune": settings.finetune.model_copy(update=finetune)})
    runtime = build_runtime(settings)
    runtime.start()
    http = build_http_server(settings, runtime.services, "127.0.0.1", 0, app=runtime.app).start()
    try:
        yield LiveBot(runtime, http, standin, SlackSender(http.url, SIGNING_SECRET, standin=standin))
    finally:
        http.stop()
        runtime.stop()
        standin.stop()


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """One bot per test module, with its own database and Polyaxon project."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("e2e")) as bot:
        yield bot
