"""RunService: the run lifecycle as handlers and the watcher see it, wired from one part per concern.

`submit.py` starts runs, `control.py` shows, tails and stops them, `resume.py` and `compare.py` do what
their names say, and `thread.py` owns each run's card and thread. This class only builds them on one
`RunDeps` and hands each command to its part.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from slack_sdk import WebClient

from bot.grammar import CompareCommand, ResumeCommand, RunCommand
from bot.runs.compare import Comparer
from bot.runs.control import RunControl
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply
from bot.runs.lookup import find_run
from bot.runs.resume import Resumer
from bot.runs.submit import Submitter
from bot.runs.thread import RunThread
from bot.settings import Settings
from bot.slack.people import People
from storage.db import SessionFactory
from storage.models import Run

if TYPE_CHECKING:
    from bot.catalog import Catalog, GateVerdict, Plan
    from bot.polyaxon import PolyaxonGateway


class RunService:
    """Submits, reports on, stops, resumes and compares runs; `thread` owns each run's card and thread."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: SessionFactory,
        catalog: Catalog,
        gateway: PolyaxonGateway,
        client: WebClient,
        clock: Callable[[], datetime],
    ) -> None:
        self.deps = RunDeps(
            settings=settings, sessions=sessions, catalog=catalog, gateway=gateway, client=client, clock=clock
        )
        self.thread = RunThread(self.deps)
        self.submitter = Submitter(self.deps, self.thread)
        self.control = RunControl(self.deps, self.thread)
        self.resumer = Resumer(self.deps, self.thread)
        self.comparer = Comparer(self.deps, self.thread)

    # The collaborators every part shares (the registry and the watcher reach them through here).

    @property
    def settings(self) -> Settings:
        """The bot's settings."""
        return self.deps.settings

    @property
    def sessions(self) -> SessionFactory:
        """The database's session factory."""
        return self.deps.sessions

    @property
    def gateway(self) -> PolyaxonGateway:
        """The Polyaxon gateway."""
        return self.deps.gateway

    @property
    def client(self) -> WebClient:
        """The Slack Web API client."""
        return self.deps.client

    @property
    def clock(self) -> Callable[[], datetime]:
        """Now, in UTC."""
        return self.deps.clock

    @property
    def people(self) -> People:
        """Runners and approvers, user groups resolved."""
        return self.deps.people

    @property
    def secrets(self) -> list[str]:
        """Tokens that are redacted from everything the bot posts."""
        return self.deps.secrets

    # The commands.

    def find(self, ref: str) -> Run:
        """The run a user means by a uuid, its first 8 characters, or a name; RunError with close names."""
        return find_run(self.deps.sessions, ref)

    def submit(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """`/finetune run`."""
        return self.submitter.submit(cmd, user=user, channel=channel, delivery_key=delivery_key)

    def dry_run(self, cmd: RunCommand, *, user: str) -> Plan:
        """`/finetune run … --dry-run`: the plan, with what the smoke-first gate would say of it."""
        return self.vet(cmd, user=user)[0]

    def vet(self, cmd: RunCommand, *, user: str) -> tuple[Plan, GateVerdict]:
        """The plan and the smoke-first gate's verdict, submitting nothing (a dry run, the run form's checks)."""
        plan = self.submitter.plan(cmd)
        unsupported = self.submitter.unsupported(plan, cmd)
        if unsupported is not None:  # `run` would be refused: the dry run says so first
            plan.warnings.append(f"`run` is refused here: {unsupported}")
        verdict = self.submitter.gate.verdict(plan, cmd, user=user, submitting=False)
        plan.validation = verdict.validation
        return plan, verdict

    def retry_pending(self) -> int:
        """Retry submissions that waited for Polyaxon; how many went through."""
        return self.submitter.retry_pending()

    def status(self, ref: str | None, *, user: str) -> Reply:
        """`/finetune status [RUN]`."""
        return self.control.status(ref, user=user)

    def logs(self, ref: str, *, lines: int, user: str) -> Reply:
        """`/finetune logs RUN`."""
        return self.control.logs(ref, lines=lines, user=user)

    def stop(self, ref: str, *, user: str) -> Reply:
        """`/finetune stop RUN`."""
        return self.control.stop(ref, user=user)

    def resume(self, cmd: ResumeCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """`/finetune resume RUN`."""
        return self.resumer.resume(cmd, user=user, channel=channel, delivery_key=delivery_key)

    def compare(self, cmd: CompareCommand, *, user: str) -> Reply:
        """`/finetune compare RUN…`."""
        return self.comparer.compare(cmd, user=user)
