"""The composition root: `build_app(settings, services)` wires the Bolt app and every Slack listener."""

from __future__ import annotations

import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.background import BackgroundScheduler
from slack_bolt import App, BoltContext
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.engine import Engine

from bot.background import BackgroundItemsCollector
from bot.deliveries import DeliveryIntake, DeliveryLedger, delivery_kind
from bot.digest import DigestRuntime
from bot.frontdoor import ADMITTED
from bot.lease import LeaseGuard, holder_id
from bot.metrics import BotMetrics
from bot.scheduler import add_interval_job, build_scheduler, stop_scheduler
from bot.services import Services
from bot.settings import Settings
from bot.slack.client import SlackReplyError, build_web_client, post_to_response_url
from bot.watch import Watcher
from handlers import actions, commands, forms, home, reactions, steps
from handlers import deliveries as delivery_jobs
from handlers import follows as follow_jobs
from handlers import watcher as watcher_jobs
from storage.db import SessionFactory, make_engine

if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonGateway

logger = logging.getLogger("finetune_bot.slack")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def build_app(settings: Settings, services: Services) -> App:
    """The Bolt app: retrying WebClient, listeners that ack in the request thread and defer their work."""
    settings.require_slack()
    signing_secret = (
        settings.slack.signing_secret.get_secret_value()
        if settings.slack.signing_secret is not None
        # Socket Mode needs no signing secret; a random one makes any HTTP request fail verification (fail closed).
        else secrets.token_hex(32)
    )
    app = App(
        name="finetune-bot",
        client=build_web_client(settings, services.metrics),
        signing_secret=signing_secret,
        token_verification_enabled=True,
        request_verification_enabled=True,
        # Every listener only acks and hands its work to `services.work`: run it in the request thread. Bolt's
        # other mode runs it on a listener pool while the request thread polls for the ack every 10 ms, which
        # under a burst cost a thread hop and a wake-up per delivery for nothing.
        process_before_response=True,
        logger=logging.getLogger("finetune_bot.bolt"),
    )

    def handle_error(error: Exception, body: dict[str, Any], context: BoltContext | None = None) -> None:
        """The one error handler (Bolt's and the deferred work's): log, count, tell the user a reference.

        The reference goes to the body's response_url only when the body is Slack's: Bolt passes the
        `context`, marked by the front door on every delivery it admitted; the deferred work passes none,
        and runs only for a delivery a listener took. Anything else (a request that failed inside Bolt
        before or during its own signature check) is logged and counted, and nothing in it is used.
        """
        ref = uuid.uuid4().hex[:8]
        kind = delivery_kind(body)
        services.metrics.listener_errors.labels(kind=kind).inc()
        logger.error("listener failed (ref %s, kind=%s): %s", ref, kind, type(error).__name__, exc_info=error)
        trusted = context is None or context.get(ADMITTED) is True
        response_url = body.get("response_url") if trusted else None
        if response_url and not isinstance(error, SlackReplyError):
            message = {
                "response_type": "ephemeral",
                "replace_original": False,
                "text": f":warning: Something went wrong on the bot's side (reference `{ref}`). "
                "The error is logged; please tell the bot's maintainers.",
            }
            try:
                post_to_response_url(str(response_url), message, services.metrics)
            except (SlackReplyError, SlackApiError) as exc:
                logger.error("could not tell the user about ref %s: %s", ref, exc)

    app.error(handle_error)
    services.work.on_error = handle_error
    build_surfaces(settings, services, app.client)
    commands.register(app, services)
    reactions.register(app, services)
    actions.register(app, services)
    forms.register(app, services)
    home.register(app, services)
    steps.register(app, services)
    return app


def build_surfaces(settings: Settings, services: Services, client: WebClient) -> None:
    """The Slack-native surfaces on the app's own client: the run form (with a catalog), App Home and the Workflow
    Builder steps."""
    from bot.forms import RunForm
    from bot.forms.seal import FormSeal
    from bot.home import AppHome
    from bot.slack.people import People
    from bot.steps import StepService

    services.slack = client
    if services.forms is None and services.catalog is not None:
        # A run from the form goes where a typed one goes: through the registry's holds when there is one.
        submit = services.registry.submit_run if services.registry is not None else None
        # The form's metadata is sealed with a key derived from a secret every replica shares, so a form opened on
        # one replica, or before a restart, is read on another.
        secret = settings.slack.signing_secret or settings.slack.app_token
        services.forms = RunForm(
            catalog=services.catalog,
            client=client,
            sessions=services.sessions,
            runs=services.runs,
            submit=submit,
            usage=services.usage,
            seal=FormSeal.from_secret(secret.get_secret_value()) if secret is not None else None,
            places=services.places,
            members=services.members,
        )
    if services.home is None:
        people = services.runs.people if services.runs is not None else People(settings=settings, client=client)
        services.home = AppHome(
            sessions=services.sessions,
            client=client,
            people=people,
            clock=services.clock,
            polyaxon=services.runs is not None,
            members=services.members,
        )
    if services.steps is None:
        # A step starts and promotes through the very services its command uses, as the workflow's requester.
        services.steps = StepService(
            sessions=services.sessions,
            client=client,
            clock=services.clock,
            places=services.places,
            catalog=services.catalog,
            runs=services.runs,
            registry=services.registry,
            release=services.release,
        )
        if services.registry is not None:
            # A promotion's step completes as soon as its request ends, whoever ended it (reaction, tick, re-issue).
            services.registry.states.on_ended.append(services.steps.on_request_ended)


@dataclass
class Runtime:
    """Everything one bot process owns: database, services, Bolt app, scheduler (with watcher and digests)."""

    settings: Settings
    engine: Engine
    services: Services
    app: App
    scheduler: BackgroundScheduler
    watcher: Watcher | None
    lease: LeaseGuard | None = None

    def start(self) -> None:
        """Start the scheduled jobs (the watcher, stored digests)."""
        self.scheduler.start()
        if self.services.digests is not None:
            self.services.digests.start()

    def stop(self) -> None:
        """Stop jobs and work in flight, then let the database go."""
        if self.services.digests is not None:
            self.services.digests.stop()
        stop_scheduler(self.scheduler)
        if self.services.follows is not None:
            # Polls stop and each follow's lease ends now: a live replica (or this one restarted) goes on with it.
            self.services.follows.shutdown()
        if self.lease is not None:
            # A clean stop hands the watcher over at once instead of after the lease's ttl.
            self.lease.release()
        self.services.work.shutdown()
        if self.services.ledger is not None:
            # Every acked delivery of this process is finished now: its lease may go at once.
            self.services.ledger.release()
        self.engine.dispose()


def build_runtime(settings: Settings, *, gateway: PolyaxonGateway | None = None) -> Runtime:
    """The composition root of `serve` and `local`: build every long-lived part once, from settings.

    Without POLYAXON_HOST (and no `gateway`) the bot still answers help, recipes, presets, dry runs and
    digests, and says of run/status/logs/stop/resume/compare that they need Polyaxon.
    """
    from bot.catalog import Catalog
    from bot.catalog.datasets import RowCache
    from bot.evals import EvalService
    from bot.follow import LogFollower
    from bot.outputs import OutputsService
    from bot.preflight import PreflightService
    from bot.registry import RegistrationService
    from bot.release import ReleaseService
    from bot.reload import CatalogReloader
    from bot.runs import RunService
    from bot.sweeps import SweepFollower, SweepService
    from bot.usage import UsageService

    engine = make_engine(settings.finetune.database_url)
    sessions = SessionFactory(engine)
    metrics = BotMetrics()
    # Failing and parked background items, read from the database at each scrape (bot.background).
    metrics.registry.register(BackgroundItemsCollector(sessions))
    client = build_web_client(settings, metrics)
    if gateway is None and settings.polyaxon.host:
        from bot.polyaxon import PolyaxonGateway  # seconds to import: only when Polyaxon is configured

        gateway = PolyaxonGateway(
            host=settings.polyaxon.host,
            token=settings.polyaxon.auth_token.get_secret_value() if settings.polyaxon.auth_token else None,
            owner=settings.polyaxon.owner,
            project=settings.polyaxon.project,
            timeout_s=settings.polyaxon.timeout_s,
        )
    # The catalog reloads itself (bot.reload): the rows of its datasets are checked once per content digest.
    rows = RowCache()
    catalog = Catalog.load(settings.finetune.catalog_dir, rows=rows)
    holder = holder_id()
    ledger = DeliveryLedger(
        sessions=sessions,
        clock=_utcnow,
        holder=holder,
        ttl=timedelta(seconds=settings.finetune.watch_lease_ttl),
        # Admits of a burst share one transaction and one writer's connection (bot/deliveries/intake.py).
        intake=DeliveryIntake(engine, durability=settings.finetune.ack_durability),
    )
    services = Services(sessions=sessions, catalog=catalog, gateway=gateway, metrics=metrics, ledger=ledger)
    scheduler = build_scheduler(settings, engine)
    # Every replica watches its own copy of the catalog (a team's git checkout, a ConfigMap): a change is taken within
    # a poll, checked whole first, and swapped in at once; one that does not load keeps the old in force.
    services.reloader = CatalogReloader(catalog, rows=rows, clock=services.clock)
    add_interval_job(
        scheduler, services.reloader.poll, name="catalog-reload", interval_s=settings.finetune.catalog_poll_s
    )
    # Every replica renews its own lease and takes over the deliveries a dead one acked and never finished.
    delivery_jobs.register(scheduler, services, interval_s=settings.finetune.watch_interval_s)
    services.digests = DigestRuntime(
        settings=settings, sessions=sessions, client=client, scheduler=scheduler, clock=services.clock
    )
    watcher: Watcher | None = None
    lease: LeaseGuard | None = None
    if gateway is not None:
        gateway.ensure_project()
        services.runs = RunService(
            settings=settings, sessions=sessions, catalog=catalog, gateway=gateway, client=client, clock=services.clock
        )
        services.usage = UsageService(services.runs.deps)
        services.registry = RegistrationService(services.runs, usage=services.usage)
        # A held run cancelled by `stop` voids its approval request at once (the runs layer cannot import the
        # registry, so the registry's void is handed to it here).
        services.runs.control.on_cancel.append(services.registry.states.void_cancelled)
        # A run recorded lost voids what waited on it the same way (its registration could never be carried out).
        services.runs.deps.on_lost.append(services.registry.states.void_lost)
        services.digests.usage = services.usage
        services.digests.items = services.runs.deps.items  # one isolation of background items per process
        services.runs.deps.items.pause = services.acks.between_items
        services.release = ReleaseService(services.registry)
        services.outputs = OutputsService(services.runs.deps, services.runs.thread)
        services.evals = EvalService(services.runs.deps, services.runs.submitter)
        # Every replica streams the follows it started and takes over those a replica that went left streaming.
        services.follows = LogFollower(services.runs.thread, holder=holder)
        follow_jobs.register(scheduler, services.follows, interval_s=settings.finetune.watch_interval_s)
        services.preflights = PreflightService(services.runs.deps, services.runs.thread, services.runs.submitter)
        runs = services.runs
        services.sweeps = SweepService(runs.deps, runs.thread, runs.submitter, runs.comparer, usage=services.usage)
        services.sweeps.on_cancel = runs.control.on_cancel  # a held sweep's request is voided as a run's is
        interval = settings.finetune.watch_interval_s
        # Several replicas share one database: the watcher runs on whichever holds this lease.
        lease = LeaseGuard(
            sessions=sessions,
            holder=holder,
            name="watcher",
            ttl=timedelta(seconds=settings.finetune.watch_lease_ttl),
            clock=services.clock,
        )
        watcher = Watcher(
            runs=services.runs,
            registry=services.registry,
            preflights=services.preflights,
            release=services.release,
            sweeps=SweepFollower(runs.deps, runs.thread, services.sweeps),
            clock=services.clock,
            stuck_after=timedelta(seconds=settings.finetune.stuck_after_s),
            still_leader=lease.still_held,
            usage=services.usage,
        )
        watcher_jobs.register(scheduler, watcher, interval_s=interval, lease=lease, first=services.acks.yield_to_acks)
    app = build_app(settings, services)
    # Steps waiting on a promotion complete when it ends; built with the app (on its client), so scheduled after it.
    steps.register_jobs(scheduler, services, interval_s=settings.finetune.watch_interval_s)
    return Runtime(settings, engine, services, app, scheduler, watcher, lease)
