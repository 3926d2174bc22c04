"""`finetune-bot local`: the embedded default in one process, with a terminal standing in for Slack.

It starts the local Polyaxon stack, the Slack stand-in and the bot (the same `build_runtime` as `serve`,
over real signed HTTP), then reads lines from the terminal or a script, like Hubot's shell adapter:

    /finetune run recipe=sft-tiny        a slash command, sent as Slack sends it (signed form post);
                                         $RUN in it stands for the newest run's name (for scripts)
    +white_check_mark [TS|last]          a reaction_added on a message (default: the newest one)
    -white_check_mark [TS|last]          a reaction_removed
    as bob                               act as another member of the workspace (alice, bob, carol;
                                         bob and carol approve unless FINETUNE_APPROVERS says otherwise)
    wait [SECONDS]                       wait until no run is active (for scripts; default 600 s)
    sleep SECONDS                        pause
    help, quit

Messages the bot posts in the channel and in threads, card edits and ephemeral replies are printed as
they arrive.
"""

from __future__ import annotations

import secrets
import shlex
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import SecretStr

from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.settings import Settings
from storage import repos

POLL_S = 0.3
DEFAULT_WAIT_S = 600.0
PEOPLE = {"alice": "U0ALICE01", "bob": "U0BOB0001", "carol": "U0CAROL01"}
LOCAL_APPROVER_GROUP = "S0APPROVE"  # the stand-in's ml-approvers group: bob and carol
HELP = (__doc__ or "").split("\n\n")[1]


def message_text(message: dict[str, Any]) -> str:
    """What a person would read: the blocks' texts, else the fallback text."""
    parts: list[str] = []
    for block in message.get("blocks") or []:
        text = block.get("text")
        if isinstance(text, dict) and text.get("text"):
            parts.append(str(text["text"]))
        for item in block.get("fields") or []:
            if isinstance(item, dict) and item.get("text"):
                parts.append(str(item["text"]))
        for element in block.get("elements") or []:
            if isinstance(element, dict) and element.get("type") in ("mrkdwn", "plain_text"):
                parts.append(str(element.get("text") or ""))
            elif isinstance(element, dict) and element.get("type") == "button":
                parts.append(f"[{element['text']['text']}]")
    return "\n".join(parts) if parts else str(message.get("text") or "")


@dataclass
class Printer:
    """Prints what appears in the stand-in's channel (cards, edits, thread replies) and ephemeral replies."""

    standin: SlackStandIn
    out: TextIO
    channel: str = DEFAULT_CHANNEL
    _seen: dict[str, str] = field(default_factory=dict)
    _replies_seen: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def poll(self) -> None:
        """Print everything new since the last poll."""
        with self._lock:
            for message in self.standin.messages(self.channel):
                self._show(message, indent="")
                for reply in self.standin.replies(self.channel, message["ts"]):
                    self._show(reply, indent="    │ ")
            posts = self.standin.response_url_posts(self.channel)
            for post in posts[self._replies_seen :]:
                self._write(f"(only you) {message_text(post['payload'])}", indent="")
            self._replies_seen = len(posts)

    def _show(self, message: dict[str, Any], *, indent: str) -> None:
        text = message_text(message)
        ts = str(message["ts"])
        if self._seen.get(ts) == text:
            return
        label = "edited" if ts in self._seen else "new"
        self._seen[ts] = text
        self._write(f"[{ts}] ({label}) {text}", indent=indent)

    def _write(self, text: str, *, indent: str) -> None:
        for line in text.splitlines() or [""]:
            self.out.write(f"{indent}{line}\n")
        self.out.flush()


class Shell:
    """Turns typed lines into Slack deliveries to the bot."""

    def __init__(
        self, *, sender: SlackSender, standin: SlackStandIn, runtime: Any, printer: Printer, out: TextIO
    ) -> None:
        self.sender = sender
        self.standin = standin
        self.runtime = runtime
        self.printer = printer
        self.out = out
        self.user = PEOPLE["alice"]

    def handle(self, line: str) -> bool:
        """Carry out one line; False when the shell should end."""
        line = line.strip()
        if not line or line.startswith("#"):
            return True
        if line in ("quit", "exit"):
            return False
        if line == "help":
            self.say(HELP)
        elif line.startswith("/finetune"):
            text = line.removeprefix("/finetune").strip()
            if "$RUN" in text:
                # Scripts can't know a run's name in advance; in Slack a person copies it from the card.
                newest = self.newest_run()
                if newest is None:
                    self.say("`$RUN` stands for the newest run, and there is none yet")
                    return True
                text = text.replace("$RUN", newest)
            sent = self.sender.slash_command(text, user_id=self.user, channel_id=DEFAULT_CHANNEL)
            if sent.status != 200:
                self.say(f"the bot answered HTTP {sent.status}: {sent.body[:200]}")
        elif line[0] in "+-" and len(line) > 1:
            self.react(line)
        elif line.startswith("as "):
            who = line.removeprefix("as ").strip()
            self.user = PEOPLE.get(who, who)
            self.say(f"you are now {who} ({self.user})")
        elif line.startswith("wait"):
            self.wait_idle(float(line.split()[1]) if len(line.split()) > 1 else DEFAULT_WAIT_S)
        elif line.startswith("sleep "):
            time.sleep(float(line.split()[1]))
        else:
            self.say(f"unknown input {line!r}; type `help`")
        return True

    def newest_run(self) -> str | None:
        """The name of the newest run in the bot's database."""
        with self.runtime.services.sessions() as s:
            runs = repos.list_recent_runs(s, limit=1)
        return runs[0].name if runs else None

    def react(self, line: str) -> None:
        """`+name [TS|last]` / `-name [TS|last]` on a message of the channel (threads included)."""
        words = shlex.split(line[1:])
        name, target = words[0].strip(":"), (words[1] if len(words) > 1 else "last")
        messages = [m for top in self.standin.messages(DEFAULT_CHANNEL) for m in [top, *self._replies(top)]]
        if not messages:
            self.say("there is no message to react to yet")
            return
        ts = max((m["ts"] for m in messages), key=float) if target == "last" else target
        if all(m["ts"] != ts for m in messages):
            self.say(f"no message {ts} in the channel")
            return
        if line[0] == "+":
            self.standin.react_as_user(self.user, DEFAULT_CHANNEL, ts, name)
            kind = "reaction_added"
        else:
            self.standin.unreact_as_user(self.user, DEFAULT_CHANNEL, ts, name)
            kind = "reaction_removed"
        self.sender.reaction(kind, user=self.user, channel=DEFAULT_CHANNEL, ts=ts, reaction=name)

    def _replies(self, top: dict[str, Any]) -> list[dict[str, Any]]:
        return self.standin.replies(DEFAULT_CHANNEL, top["ts"])

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until the bot has no active run (and has told the last transition); False on timeout."""
        deadline = time.monotonic() + timeout_s
        time.sleep(2 * POLL_S)  # let a command sent just before reach the database
        while time.monotonic() < deadline:
            with self.runtime.services.sessions() as s:
                active = list(repos.list_active_runs(s))
                unposted = list(repos.unposted_status_events(s))
            if not active and not unposted:
                time.sleep(2 * POLL_S)
                self.printer.poll()
                return True
            time.sleep(1.0)
        self.say(f"still {len(active)} active run(s) after {timeout_s:.0f} s")
        return False

    def say(self, text: str) -> None:
        self.out.write(f"» {text}\n")
        self.out.flush()


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
    return settings.model_copy(update={"slack": slack, "polyaxon": polyaxon, "finetune": finetune})


def build_local_assets(catalog_dir: Path, out: TextIO) -> None:
    """Build the local models and datasets recipes name (e.g. sft-tiny's tiny Llama) when they are missing.

    A build command starts with `python`: it runs with this interpreter, in the repository root.
    """
    import subprocess

    from bot.catalog import Catalog

    catalog = Catalog.load(catalog_dir)
    for build in catalog.missing_local_builds():
        out.write(f"» building a local asset: {build}\n")
        out.flush()
        argv = shlex.split(build)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        done = subprocess.run(argv, cwd=catalog.repo_root, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            # Only the recipes that need it are affected; a run of one of them says what is missing.
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            out.write(f"» could not build it ({last}); recipes that need it will refuse to run\n")
            out.flush()


def run_local(settings: Settings, *, store: Path, lines: Iterable[str] | None, out: TextIO = sys.stdout) -> int:
    """Start everything, run the shell until EOF/quit, stop everything; the exit status."""
    from bot.app import build_runtime
    from bot.web import build_http_server

    workdir = Path.cwd()
    build_local_assets(settings.finetune.catalog_dir, out)
    stack = LocalPolyaxonStack(store / "polyaxon", workdir=workdir)
    standin = SlackStandIn().start()
    signing_secret = secrets.token_hex(16)
    runtime = None
    http = None
    stop = threading.Event()
    try:
        out.write("» starting the local Polyaxon server and agent…\n")
        out.flush()
        stack.start()
        bot_settings = local_settings(settings, standin, stack.host, signing_secret)
        runtime = build_runtime(bot_settings)
        runtime.start()
        http = build_http_server(bot_settings, runtime.services, "127.0.0.1", 0, app=runtime.app).start()
        printer = Printer(standin, out)
        shell = Shell(
            sender=SlackSender(http.url, signing_secret, standin=standin),
            standin=standin,
            runtime=runtime,
            printer=printer,
            out=out,
        )

        def follow() -> None:
            while not stop.wait(POLL_S):
                printer.poll()

        threading.Thread(target=follow, name="local-printer", daemon=True).start()
        out.write(
            f"» ready: Polyaxon {stack.host} (UI {stack.host}/ui), channel #ml-training, you are alice. Type `help`.\n"
        )
        out.flush()
        interactive = lines is None and sys.stdin.isatty()
        source: Iterable[str] = lines if lines is not None else sys.stdin
        if interactive:
            out.write("finetune> ")
            out.flush()
        for line in source:
            if not shell.handle(line):
                break
            time.sleep(POLL_S)  # let the ack's reply arrive before the next prompt
            printer.poll()
            if interactive:
                out.write("finetune> ")
                out.flush()
        printer.poll()
        return 0
    finally:
        stop.set()
        if http is not None:
            http.stop()
        if runtime is not None:
            runtime.stop()
        standin.stop()
        stack.stop()
