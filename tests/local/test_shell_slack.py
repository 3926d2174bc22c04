"""The local shell in front of the real bot (signed requests over HTTP, the Slack stand-in), without Polyaxon:
its own `help`, and what it prints of the bot's answers and uploads, as Slack would show them."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from slack_sdk import WebClient

from bot.local.printer import RUN_FORM_OPENED, Printer
from bot.local.shell import Shell
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.runs.thread import CARD_REPLACED
from tests.fixtures.slack import BotServer


@dataclass
class Session:
    """A shell wired as `finetune-bot local` wires it, and what it printed."""

    shell: Shell
    printer: Printer
    out: io.StringIO
    files: Path

    def type(self, *lines: str) -> str:
        """Type `lines`, wait for the bot's answers, and return everything printed since."""
        start = len(self.out.getvalue())
        for line in lines:
            assert self.shell.handle(line)
        assert self.shell.drain()
        self.printer.poll()
        return self.out.getvalue()[start:]


@pytest.fixture
def session(bot_server: BotServer, sender: SlackSender, slack_standin: SlackStandIn, tmp_path: Path) -> Session:
    out = io.StringIO()
    files = tmp_path / "store" / "files"
    printer = Printer(slack_standin, out, files_dir=files)
    shell = Shell(
        sender=sender,
        standin=slack_standin,
        runtime=None,  # only `$RUN`, `wait` and `home`'s database reads need it
        printer=printer,
        out=out,
        work=bot_server.services.work,
    )
    return Session(shell, printer, out, files)


@pytest.fixture
def bot_client(slack_standin: SlackStandIn) -> Iterator[WebClient]:
    """The WebClient the bot itself posts with (same token, same stand-in)."""
    yield WebClient(base_url=slack_standin.base_url, token=slack_standin.bot_token, retry_handlers=[])


def test_help_lists_the_lines_the_shell_understands(session: Session) -> None:
    said = session.type("help")
    for line in ("/finetune run recipe=", "+white_check_mark", "-white_check_mark", "form run", "home", "as bob"):
        assert line in said, said
    assert "wait [SECONDS]" in said and "sleep SECONDS" in said and "quit" in said and "Ctrl-C" in said
    assert said.rstrip().splitlines()[-1].strip() != "adapter:"  # not the docstring's sentence alone


def test_the_bots_answer_is_printed_with_entities_decoded(session: Session, slack_standin: SlackStandIn) -> None:
    said = session.type("/finetune run recipe=a<b")

    # The bot escapes what it echoes (`&lt;` on the wire); Slack shows the character.
    wire = str([post["payload"] for post in slack_standin.response_url_posts(DEFAULT_CHANNEL)])
    assert "found '&lt;'" in wire, wire
    assert "found '<'" in said and "&lt;" not in said, said


def test_mentions_read_as_names_and_slack_only_wording_reads_as_local(session: Session, bot_client: WebClient) -> None:
    bot_client.chat_postMessage(
        channel=DEFAULT_CHANNEL, text=f"<@U0ALICE01> asked <!subteam^S0APPROVE>. {CARD_REPLACED}"
    )

    said = session.type()

    assert "@alice asked @ml-approvers." in said, said
    assert "another Slack workspace" not in said
    assert "started a fresh Slack stand-in, which keeps no messages between sessions" in said, said


def test_an_uploaded_plot_is_saved_under_the_store_and_its_path_printed(
    session: Session, bot_client: WebClient
) -> None:
    card = bot_client.chat_postMessage(channel=DEFAULT_CHANNEL, text="card")["ts"]
    plot = b"\x89PNG\r\n\x1a\n a compare plot"
    # As the bot attaches a compare or sweep plot in a run's thread (files_upload_v2).
    bot_client.files_upload_v2(
        channel=DEFAULT_CHANNEL, thread_ts=card, content=plot, filename="compare eval_loss.png", title="eval_loss"
    )
    bot_client.files_upload_v2(
        channel=DEFAULT_CHANNEL, thread_ts=card, content=b"two", filename="compare eval_loss.png"
    )

    said = session.type()

    saved = sorted(session.files.iterdir())
    assert len(saved) == 2, said  # two uploads of one name are two files
    first = next(path for path in saved if path.read_bytes() == plot)
    assert first.name.endswith("-compare_eval_loss.png")
    assert f"[file eval_loss, {len(plot)} bytes, saved as {first}]" in said, said
    assert all(str(path) in said for path in saved)
    session.printer.poll()  # printed once, saved once
    assert sorted(session.files.iterdir()) == saved


def test_a_step_runs_as_a_workflow_would_and_its_completion_is_printed(session: Session) -> None:
    said = session.type("step start_finetune_run recipe=sft-tinny channel=#ml-training")
    # This bot has no Polyaxon; the recipe is checked first, and the step fails with the closest name.
    assert "step start_finetune_run failed:" in said and "sft-tiny" in said.replace("sft-tinny", ""), said
    said = session.type("step start_finetune_run recipe=sft-tiny channel=#nowhere")
    assert "no channel #nowhere" in said, said
    said = session.type("step no_such_step recipe=x")
    assert "no step 'no_such_step' in the app manifest" in said, said
    assert "step start_finetune_run recipe=sft-tiny channel=#ml-training" in session.type("help")


def test_the_run_form_a_bare_run_opens_is_told_and_form_run_fills_it(session: Session) -> None:
    said = session.type("/finetune run")
    assert said == f"» {RUN_FORM_OPENED}\n", said  # in Slack a modal: one line says what opened and how to fill it

    said = session.type("form run", "cancel")
    assert "» the run form is open" in said and RUN_FORM_OPENED not in said, said  # the shell shows this one


def test_as_someone_the_workspace_lacks_is_refused_and_you_stay_who_you_were(session: Session) -> None:
    said = session.type("as dave", "/finetune status")
    assert "'as dave': there is no 'dave' in this workspace; the shell acts as " in said, said
    assert session.shell.user == "U0ALICE01" and "not a Slack user id" not in said, said
    assert "you are now bob (U0BOB0001)" in session.type("as bob")
