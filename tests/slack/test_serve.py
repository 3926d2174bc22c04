"""`run_serve` in its own process, as `finetune-bot serve` runs it: HTTP mode and Socket Mode, then SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.sender import slash_command_fields
from bot.local.slack.server import DEFAULT_CHANNEL
from tests.fixtures.slack import SIGNING_SECRET, wait_for

REPO = Path(__file__).resolve().parents[2]
SERVE = """
from bot.settings import load_settings
from bot.services import Services
from bot.web import run_serve
from storage.db import SessionFactory, make_engine
from storage.migrate import upgrade

settings = load_settings()
engine = make_engine(settings.finetune.database_url)
upgrade(engine)
run_serve(settings, Services(sessions=SessionFactory(engine)), settings.http.host, settings.http.port)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture(params=["http", "socket"])
def served(request: pytest.FixtureRequest, slack_standin: SlackStandIn, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(mode, base URL) of a `run_serve` process configured only through the environment."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "FINETUNE_"))}
    env.update(
        {
            "SLACK_BOT_TOKEN": slack_standin.bot_token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_BASE_URL": slack_standin.base_url,
            "FINETUNE_DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
            "FINETUNE_HTTP_HOST": "127.0.0.1",
            "FINETUNE_HTTP_PORT": str(port),
            "POLYAXON_NO_CONFIG": "true",
            "PYTHONPATH": str(REPO),
        }
    )
    if request.param == "socket":
        env["SLACK_APP_TOKEN"] = slack_standin.app_token
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url) or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        yield request.param, url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, out.decode()[-3000:]
    for secret in (slack_standin.bot_token, SIGNING_SECRET, slack_standin.app_token):
        assert secret not in out.decode()


def test_serve_answers_slack_and_stops_on_sigterm(served: tuple[str, str], slack_standin: SlackStandIn) -> None:
    mode, url = served
    response_url = slack_standin.new_response_url(channel=DEFAULT_CHANNEL, user="U0ALICE01")
    if mode == "http":
        assert (
            SlackSender(url, SIGNING_SECRET)
            .slash_command("", fields=slash_command_fields("help", response_url=response_url))
            .status
            == 200
        )
    else:
        assert slack_standin.socket_mode.wait_connected(30)
        assert (
            slack_standin.socket_mode.deliver("slash_commands", slash_command_fields("help", response_url=response_url))
            is not None
        )
        # Socket Mode serves no Slack endpoint over HTTP, only health and metrics.
        assert SlackSender(url, SIGNING_SECRET).slash_command("help").status == 404
    wait_for(lambda: slack_standin.response_url_posts(), timeout=20)
    with urllib.request.urlopen(url + "/metrics") as resp:
        assert 'finetune_bot_slack_acks_total{kind="command"} 1.0' in resp.read().decode()
