"""What every part of the run lifecycle works with, held once so that all parts see the same collaborators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from slack_sdk import WebClient

from bot.background import BackgroundItems
from bot.settings import Settings
from bot.slack.people import People
from storage.db import SessionFactory
from storage.models import Run

if TYPE_CHECKING:
    from bot.catalog import Catalog
    from bot.polyaxon import PolyaxonGateway


@dataclass
class RunDeps:
    """Settings, database, catalog, Polyaxon, Slack and the clock; `secrets` are redacted from every post."""

    settings: Settings
    sessions: SessionFactory
    catalog: Catalog
    gateway: PolyaxonGateway
    client: WebClient
    clock: Callable[[], datetime]
    people: People = field(init=False)
    secrets: list[str] = field(init=False)
    # The one isolation of background items, shared by every pass that works with runs.
    items: BackgroundItems = field(init=False)
    # Called with a run as it is recorded lost (bot.runs.lost); each closes what waited on it and returns the
    # sentence that says so (None: nothing). The registry adds its own (this layer may not import it).
    on_lost: list[Callable[[Run], str | None]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.people = People(settings=self.settings, client=self.client)
        self.secrets = [
            s.get_secret_value()
            for s in (
                self.settings.slack.bot_token,
                self.settings.slack.signing_secret,
                self.settings.slack.app_token,
                self.settings.polyaxon.auth_token,
                self.settings.finetune.release_webhook_secret,
            )
            if s is not None
        ]
        self.items = BackgroundItems(sessions=self.sessions, clock=self.clock, secrets=self.secrets)
