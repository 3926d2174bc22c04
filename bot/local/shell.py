"""`finetune-bot local`: the embedded default in one process, with a terminal standing in for Slack.

It starts the local Polyaxon stack, the Slack stand-in and the bot (the same `build_runtime` as `serve`,
over real signed HTTP), then reads lines from the terminal or a script, like Hubot's shell adapter: the
lines it understands are `bot.local.lines.SHELL_LINES`, which `help` prints; a line it cannot carry out is answered
with what would work (`bot.local.lines`).

What a person in the channel would see is printed as it arrives: messages and thread posts in full, an
edit of one as a line of what changed, reactions, replies only you see, and one line for a modal the bot opens
(`form run` fills the run form here). The bot's logs go to a file.
A command that names a recipe whose local model or dataset is not built yet builds it first (`assets.py`).
At the end of the input the shell waits until the bot has answered everything it was sent (not for runs).
"""

from __future__ import annotations

import http.client
import secrets
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from pydantic import SecretStr

from bot.local.assets import RecipeAssets
from bot.local.form import FormDriver
from bot.local.lines import NO_EMOJI, PEOPLE, SHELL_LINES, person, seconds, unknown_line
from bot.local.messages import message_text, readable
from bot.local.pending import DRAIN_TIMEOUT_S, drain
from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.printer import FILES_FOLDER, Printer
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL, ApiError
from bot.local.steps import StepDriver
from bot.services import DeferredWork
from bot.settings import Settings
from storage import repos

POLL_S = 0.3
DEFAULT_WAIT_S = 600.0
LOCAL_APPROVER_GROUP = "S0APPROVE"  # the stand-in's ml-approvers group: bob and carol
INTERRUPTED_EXIT = 130  # what a shell reports for a program ended by SIGINT (128 + 2)


class Shell:
    """Turns typed lines into Slack deliveries to the bot."""

    def __init__(
        self,
        *,
        sender: SlackSender,
        standin: SlackStandIn,
        runtime: Any,
        printer: Printer,
        out: TextIO,
        work: DeferredWork,
        assets: RecipeAssets | None = None,
    ) -> None:
        self.sender = sender
        self.standin = standin
        self.runtime = runtime
        self.printer = printer
        self.out = out
        self.work = work
        self.assets = assets
        self.user = PEOPLE["alice"]
        self.printer.viewer = self.user
        self.sent_at = time.monotonic()  # when the last delivery went to the bot
        self.form: FormDriver | None = None
        self.steps = StepDriver(sender=sender, standin=standin, say=self.say)

    def handle(self, line: str) -> bool:
        """Carry out one line; False when the shell should end."""
        line = line.strip()
        if not line or line.startswith("#"):
            return True
        if line in ("quit", "exit"):
            return False
        try:
            self.steps.poll()  # a step that waited (a promotion) prints its completion before the next line's output
            self._handle(line)
        except (OSError, http.client.HTTPException) as exc:
            self.say(f"could not reach the bot: {exc}")
        except ValueError as exc:
            self.say(f"{line!r}: {exc}; type `help`")
        self.printer.drive_views(self.form is not None and self.form.is_open)  # a modal the bot opens else is told
        return True

    def _handle(self, line: str) -> None:
        if self.form is not None and self.form.is_open and line not in ("help", "quit", "exit"):
            self.form.handle(line)
        elif line == "help":
            self.say(SHELL_LINES)
        elif line == "form run":
            self.form = FormDriver(
                sender=self.sender, standin=self.standin, user=self.user, say=self.say, names=self.printer.names
            )
            self.printer.drive_views(True)  # the form lists its own fields
            self.form.open(self.command)
        elif line == "home":
            self.home()
        elif line.startswith("/finetune"):
            self.command(line.removeprefix("/finetune").strip())
        elif line[0] in "+-":
            self.react(line)
        else:
            self._handle_word(line)

    def _handle_word(self, line: str) -> None:
        """A line that starts with one of the shell's words (`step`, `as`, `wait`, `sleep`), or none it knows."""
        first, *rest = line.split()
        if first == "step":
            self.sent_at = time.monotonic()
            self.steps.run(line, user=self.user)
        elif first == "as":
            name, self.user = person(" ".join(rest))
            self.printer.viewer = self.user
            self.say(f"you are now {name} ({self.user})")
        elif first == "wait":
            self.wait_idle(seconds(rest[0], verb="wait", example="120") if rest else DEFAULT_WAIT_S)
        elif first == "sleep":
            time.sleep(seconds(rest[0] if rest else None, verb="sleep", example="5"))
        else:
            self.say(unknown_line(line))

    def command(self, text: str) -> None:
        """Send `/finetune <text>` as a signed slash command, after building what its recipe needs."""
        if "$RUN" in text:
            # Scripts can't know a run's name in advance; in Slack a person copies it from the card.
            self.drain(quiet=True)  # a run just asked for is then in the database
            newest = self.newest_run()
            if newest is None:
                self.say("`$RUN` stands for the newest run, and there is none yet")
                return
            text = text.replace("$RUN", newest)
        if self.assets is not None:
            self.assets.prepare(text)
        self.sent_at = time.monotonic()
        sent = self.sender.slash_command(text, user_id=self.user, channel_id=DEFAULT_CHANNEL)
        self.sent_at = time.monotonic()
        if sent.status != 200:
            self.say(f"the bot answered HTTP {sent.status}: {sent.body[:200]}")

    def home(self) -> None:
        """Open the App Home tab (`app_home_opened`) and print what the bot published there."""
        self.sent_at = time.monotonic()
        self.sender.home_opened(self.user)
        self.sent_at = time.monotonic()
        self.drain(quiet=True)  # the bot publishes after the ack (or not at all when nothing changed)
        view = self.standin.views.home(self.user)
        if view is None:
            self.say("the bot published no Home tab")
            return
        for text in message_text(view).splitlines():
            self.say(f"  {readable(text, self.printer.names)}")

    def newest_run(self) -> str | None:
        """The name of the newest run in the bot's database (a sweep, not one of its trials; not a serving check,
        which belongs to a registered version)."""
        with self.runtime.services.sessions() as s:
            runs = [r for r in repos.list_recent_runs(s, limit=200) if r.sweep_id is None and r.kind != "serving"]
        return runs[0].name if runs else None

    def react(self, line: str) -> None:
        """`+name [TS|last]` / `-name [TS|last]` on a message of the channel (threads included)."""
        words = shlex.split(line[1:])
        if not words or not words[0].strip(":"):
            self.say(NO_EMOJI)
            return
        name, target = words[0].strip(":"), (words[1] if len(words) > 1 else "last")
        messages = [m for top in self.standin.messages(DEFAULT_CHANNEL) for m in [top, *self._replies(top)]]
        if not messages:
            self.say("there is no message to react to yet")
            return
        ts = max((m["ts"] for m in messages), key=float) if target == "last" else target
        if all(m["ts"] != ts for m in messages):
            self.say(f"no message {ts} in the channel")
            return
        try:
            if line[0] == "+":
                self.standin.react_as_user(self.user, DEFAULT_CHANNEL, ts, name)
                kind = "reaction_added"
            else:
                self.standin.unreact_as_user(self.user, DEFAULT_CHANNEL, ts, name)
                kind = "reaction_removed"
        except ApiError as err:  # already_reacted, no_reaction: Slack would not send the event either
            self.say(f"Slack says {err.error}")
            return
        self.sent_at = time.monotonic()
        self.sender.reaction(kind, user=self.user, channel=DEFAULT_CHANNEL, ts=ts, reaction=name)
        self.sent_at = time.monotonic()

    def _replies(self, top: dict[str, Any]) -> list[dict[str, Any]]:
        return self.standin.replies(DEFAULT_CHANNEL, top["ts"])

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S, *, quiet: bool = False) -> bool:
        """Wait until the bot has carried out and answered every delivery sent (not runs); False on timeout."""
        done = drain(self.work, sent_at=self.sent_at, timeout_s=timeout_s)
        self.printer.poll()
        if not done and not quiet:
            busy = self.work.in_flight
            self.say(f"stopped waiting after {timeout_s:.0f} s: the bot is still handling {busy} delivery(ies)")
        return done

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until the bot has no active run, has told the last transition, has settled every preflight and
        serving check (its report posted) and summed up every sweep; False on timeout."""
        deadline = time.monotonic() + timeout_s
        self.drain(min(timeout_s, DRAIN_TIMEOUT_S))  # a run just asked for is then in the database
        active: list[Any] = []
        while time.monotonic() < deadline:
            with self.runtime.services.sessions() as s:
                active = list(repos.list_active_runs(s))
                unposted = list(repos.unposted_status_events(s))
                unsettled = [
                    *repos.running_preflights(s),
                    *repos.followed_sweeps(s),
                    *repos.running_serving_checks(s),
                ]
            if not active and not unposted and not unsettled:
                self.drain(max(1.0, deadline - time.monotonic()), quiet=True)
                return True
            time.sleep(1.0)
        self.say(f"still {len(active)} active run(s) after {timeout_s:.0f} s")
        return False

    def say(self, text: str) -> None:
        """A note of the shell's own (not something the bot said)."""
        note(self.out, text)


def local_settings(settings: Settings, standin: SlackStandIn, polyaxon_host: str, signing_secret: str) -> Settings:
    """The user's settings with Slack pointed at the stand-in and Polyaxon at the local stack."""
    slack = settings.slack.model_copy(
        update={
            "bot_token": SecretStr(standin.bot_token),
            "signing_secret": SecretStr(signing_secret),
            "app_token": None,
            "api_base_url": standin.base_url,
        }
    )
    polyaxon = settings.polyaxon.model_copy(update={"host": polyaxon_host, "auth_token": None})
    finetune = settings.finetune
    if not finetune.approvers:
        # Without FINETUNE_APPROVERS nobody could approve a registration here: the stand-in's approver group
        # (bob and carol) approves, so `as bob` then `+white_check_mark` shows the whole flow.
        finetune = finetune.model_copy(update={"approvers": [LOCAL_APPROVER_GROUP]})
    if not finetune.unsupported_run_kinds:
        # The local stack has no training operator: a distributed run is refused up front with the way forward
        # (its preflight runs here), instead of failing in Polyaxon's converter.
        finetune = finetune.model_copy(update={"unsupported_run_kinds": ["pytorchjob"]})
    return settings.model_copy(update={"slack": slack, "polyaxon": polyaxon, "finetune": finetune})


def run_local(
    settings: Settings,
    *,
    store: Path,
    lines: Iterable[str] | None,
    out: TextIO = sys.stdout,
    log_path: Path | None = None,
    verbose: bool = False,
) -> int:
    """Start everything, run the shell until EOF/quit, wait for the bot's answers, stop everything; the exit status."""
    from bot.app import build_runtime
    from bot.web import build_http_server

    workdir = Path.cwd()
    stack = LocalPolyaxonStack(store / "polyaxon", workdir=workdir)
    files = store.resolve() / FILES_FOLDER
    standin = SlackStandIn().start()
    signing_secret = secrets.token_hex(16)
    runtime = None
    http = None
    stop = threading.Event()
    try:
        if log_path is not None:
            shown = "shown here too" if verbose else "`--verbose` shows them here too"
            note(out, f"the bot's logs go to {log_path} ({shown})")
        note(out, f"this session keeps everything under {store.resolve()}; the bot's database is {_where(settings)}")
        note(out, "starting the local Polyaxon server and agent…")
        stack.start()
        for line in stack.leftovers_stopped:
            note(out, line)
        bot_settings = local_settings(settings, standin, stack.host, signing_secret)
        runtime = build_runtime(bot_settings)
        work = runtime.services.work
        runtime.start()
        http = build_http_server(bot_settings, runtime.services, "127.0.0.1", 0, app=runtime.app).start()
        printer = Printer(standin, out, files_dir=files)
        shell = Shell(
            sender=SlackSender(http.url, signing_secret, standin=standin),
            standin=standin,
            runtime=runtime,
            printer=printer,
            out=out,
            work=work,
            assets=RecipeAssets(runtime.services.catalog, partial(note, out)) if runtime.services.catalog else None,
        )

        def follow() -> None:
            while not stop.wait(POLL_S):
                printer.poll()

        threading.Thread(target=follow, name="local-printer", daemon=True).start()
        note(
            out, f"ready: Polyaxon {stack.host} (UI {stack.host}/ui), channel #ml-training, you are alice. Type `help`."
        )
        interactive = lines is None and sys.stdin.isatty()
        source: Iterable[str] = lines if lines is not None else sys.stdin
        prompt(out, interactive)
        for line in source:
            if not shell.handle(line):
                break
            time.sleep(POLL_S)  # let the ack's reply arrive before the next prompt
            printer.poll()
            prompt(out, interactive)
        # The end of a script is not the end of what it asked: print every answer before stopping the bot.
        shell.drain()
        return 0
    except KeyboardInterrupt:
        return interrupted(out)
    finally:
        stop.set()
        if http is not None:
            http.stop()
        if runtime is not None:
            runtime.stop()
        standin.stop()
        stack.stop()


def _where(settings: Settings) -> str:
    """The bot's database as a person reads it: a file's path, else the URL without its password."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.finetune.database_url)
    return str(url.database) if url.drivername.startswith("sqlite") and url.database else url.render_as_string()


def interrupted(out: TextIO) -> int:
    """Ctrl-C: one line saying what happens now, further Ctrl-Cs ignored while everything stops; the exit status."""
    if threading.current_thread() is threading.main_thread():
        # A second Ctrl-C during the stop would leave a traceback and the stack half stopped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    out.write("\n")
    note(out, "interrupted (Ctrl-C): stopping the bot and the local Polyaxon stack (runs still going stop with it)")
    return INTERRUPTED_EXIT


def note(out: TextIO, text: str) -> None:
    """One line of the shell's own."""
    out.write(f"» {text}\n")
    out.flush()


def prompt(out: TextIO, interactive: bool) -> None:
    """The prompt, when a person types."""
    if interactive:
        out.write("finetune> ")
        out.flush()
