"""Kill -9 the bot mid-run, or right after it acked a command, and start it again: nothing is lost.

Mid-run, the watcher picks the run up from the database: no transition is told twice and none is missed; the
card is still the one card of the run. Right after an ack, the next process carries the acked command out, once.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import select

from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack import SlackSender, SlackStandIn
from storage import repos
from storage.db import SessionFactory, make_engine
from storage.migrate import upgrade
from storage.models import Delivery, Run
from tests.e2e.conftest import ALICE, CHANNEL, REPO, SIGNING_SECRET, serve_env
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


class ServeProcess:
    """`finetune-bot serve` as its own process (as in production), restartable."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> str:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        exe = Path(sys.executable).with_name("finetune-bot")
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(exe), "serve", "--port", str(port)], cwd=REPO, env=self.env, stdout=log, stderr=log
            )
        wait_for(lambda: _healthy(self.url), timeout=90, interval=0.2)
        return self.url

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def newest_run(sessions: SessionFactory) -> Run | None:
    """The newest run in the bot's database."""
    with sessions() as s:
        runs = repos.list_recent_runs(s, limit=1)
    return runs[0] if runs else None


def assert_told_once(standin: SlackStandIn, sessions: SessionFactory, run: Run) -> None:
    """One card, edited to succeeded; each transition recorded once and told once in its thread."""
    assert run.card_ts is not None
    # A status is recorded before it is told and the card edited: wait for both, then count.
    wait_for(
        lambda: (
            "succeeded" in str(standin.message(CHANNEL, run.card_ts or "").get("blocks"))
            and any("*succeeded*" in str(m.get("text")) for m in standin.replies(CHANNEL, run.card_ts or ""))
        ),
        timeout=60,
    )
    thread = [str(m.get("text")) for m in standin.replies(CHANNEL, run.card_ts)]
    assert sum("Status: *running*" in t for t in thread) == 1, thread
    assert sum("*succeeded*" in t for t in thread) == 1, thread
    assert len(standin.messages(CHANNEL)) == 1, "still one card for the run"
    assert "succeeded" in str(standin.message(CHANNEL, run.card_ts).get("blocks"))
    with sessions() as s:
        events = [e.status for e in repos.list_status_events(s, run_id=run.id or 0)]
    assert len(events) == len(set(events)), events


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


def test_kill_9_mid_run_then_restart_loses_and_repeats_nothing(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, standin: SlackStandIn, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = make_engine(url)
    upgrade(engine)
    sessions = SessionFactory(engine)
    env = serve_env(standin, polyaxon_stack.host, url, project=f"restart-{uuid.uuid4().hex[:8]}")
    bot = ServeProcess(env, tmp_path / "serve.log")
    try:
        sender = SlackSender(bot.start(), SIGNING_SECRET, standin=standin)
        assert sender.slash_command("run recipe=sft-tiny max_steps=60", user_id=ALICE, channel_id=CHANNEL).status == 200

        wait_for(lambda: (r := newest_run(sessions)) is not None and r.status == "running", timeout=120, interval=0.3)
        bot.kill9()  # mid-run: no shutdown code of the bot runs
        # The run goes on in Polyaxon while the bot is down.
        sender = SlackSender(bot.start(), SIGNING_SECRET, standin=standin)
        final = wait_for(
            lambda: (r := newest_run(sessions)) is not None and r.status == "succeeded" and r, timeout=240, interval=0.5
        )
        assert_told_once(standin, sessions, final)
    finally:
        bot.stop()
        engine.dispose()


def test_kill_9_right_after_the_ack_then_restart_carries_the_command_out_once(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, standin: SlackStandIn, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = make_engine(url)
    upgrade(engine)
    sessions = SessionFactory(engine)
    env = serve_env(standin, polyaxon_stack.host, url, project=f"ack-{uuid.uuid4().hex[:8]}")
    bot = ServeProcess(env, tmp_path / "serve.log")
    try:
        sender = SlackSender(bot.start(), SIGNING_SECRET, standin=standin)
        sent = sender.slash_command("run recipe=sft-tiny max_steps=10", user_id=ALICE, channel_id=CHANNEL)
        assert sent.status == 200  # acked: Slack will not send it again
        bot.kill9()  # before the work after the ack (planning takes far longer than this)
        with sessions() as s:
            [delivery] = [d for d in s.exec(select(Delivery)).all() if d.kind == "command"]
        assert delivery.state == "received" and delivery.payload is not None
        assert "token" not in delivery.payload  # stored without Slack's verification token

        bot.start()  # a new process: it takes the dead one's delivery over once that one's lease expires
        final = wait_for(
            lambda: (r := newest_run(sessions)) is not None and r.status == "succeeded" and r, timeout=240, interval=0.5
        )
        assert_told_once(standin, sessions, final)
        replies = [p for p in standin.response_url_posts(CHANNEL) if "Planned sft-tiny" in str(p["payload"])]
        assert len(replies) == 1, standin.response_url_posts(CHANNEL)
        with sessions() as s:
            again = s.exec(select(Delivery).where(Delivery.key == delivery.key)).one()
        assert again.state == "done" and again.attempts == 2
        assert "acked by a process that died" in (tmp_path / "serve.log").read_text()
    finally:
        bot.stop()
        engine.dispose()
