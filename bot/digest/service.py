"""Scheduled digests per channel: `/finetune digest …`, the stored APScheduler jobs, and exactly-one posting."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.cron import CronTrigger
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.background import BackgroundItems
from bot.digest.compose import (
    DigestApproval,
    DigestData,
    DigestRegistration,
    DigestRun,
    compose_digest,
    digest_fallback_text,
)
from bot.digest.jobs import attach, detach, digest_job
from bot.digest.schedule import cron_for, describe_schedule
from bot.grammar import DigestCommand
from bot.runs.evals import primary_metric
from bot.scheduler import PERSISTENT, add_interval_job, latest_fire_time
from bot.settings import Settings
from bot.slack.blocks import escape
from bot.slack.links import WorkspaceAddress, archive_link
from bot.usage import UsageService
from storage import repos
from storage.db import SessionFactory
from storage.models import ApprovalRequest, Run, Sweep

log = logging.getLogger(__name__)

# The background pass of scheduled digests (bot.background): one item per channel.
DIGEST = "digest"


class DigestRuntime:
    """What digests need at run time: settings, database, Slack client, scheduler, clock."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: SessionFactory,
        client: WebClient,
        scheduler: BaseScheduler,
        clock: Callable[[], datetime],
        key: str = "default",
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.client = client
        self.scheduler = scheduler
        self.clock = clock
        self.key = key
        # One channel's job is aligned with its row by one thread at a time (see `align_job`).
        self._jobs_lock = threading.Lock()
        self._address = WorkspaceAddress(client)
        # Failing digests are isolated per channel (bot.background); the composition root shares the runs' one.
        self.items = BackgroundItems(sessions=sessions, clock=clock)
        # Set by the composition root when Polyaxon is configured: the digest carries the week's usage.
        self.usage: UsageService | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Make this process's runtime reachable for stored jobs and align jobs with the schedules table."""
        attach(self)
        self.sync_jobs()
        add_interval_job(
            self.scheduler, self.retry_due, name="digest-retries", interval_s=self.settings.finetune.watch_interval_s
        )

    def stop(self) -> None:
        """Forget this runtime (the scheduler is stopped by its owner)."""
        detach(self)

    def sync_jobs(self) -> None:
        """Every stored schedule has exactly its job; jobs without a schedule are removed."""
        with self.sessions() as s:
            schedules = {sch.channel: (sch.cron, sch.timezone) for sch in repos.list_digest_schedules(s)}
        for job in self.scheduler.get_jobs(jobstore=PERSISTENT):
            if job.id.startswith("digest:") and job.id.removeprefix("digest:") not in schedules:
                job.remove()
        for channel, (cron, tz) in schedules.items():
            existing = self.scheduler.get_job(f"digest:{channel}", jobstore=PERSISTENT)
            if existing is None or str(existing.trigger) != str(CronTrigger.from_crontab(cron, timezone=tz)):
                self._add_job(channel, cron, tz)

    def align_job(self, channel: str) -> None:
        """The channel's job made to say what its stored schedule says now (committed): commands for one channel
        may arrive together, so the job follows the row the last of them left, never the command's own values."""
        with self._jobs_lock:
            with self.sessions() as s:
                schedule = repos.get_digest_schedule(s, channel=channel)
            if schedule is None:
                with contextlib.suppress(JobLookupError):
                    self.scheduler.remove_job(f"digest:{channel}", jobstore=PERSISTENT)
            else:
                self._add_job(channel, schedule.cron, schedule.timezone)

    def _add_job(self, channel: str, cron: str, tz: str) -> None:
        self.scheduler.add_job(
            digest_job,
            CronTrigger.from_crontab(cron, timezone=tz),
            args=[self.key, channel],
            id=f"digest:{channel}",
            name=f"digest {channel}",
            jobstore=PERSISTENT,
            replace_existing=True,
        )

    # --- the command ----------------------------------------------------------------------------

    def apply(self, cmd: DigestCommand, *, channel: str, user: str) -> str:
        """Carry out `/finetune digest …` in `channel`; the reply text for the user."""
        if cmd.mode == "now":
            ts = self.post_now(channel)
            return "Posted the digest." if ts else "Could not post the digest; see the bot's log."
        if cmd.mode == "off":
            with self.sessions() as s:
                removed = repos.delete_digest_schedule(s, channel=channel)
                repos.add_audit(s, user=user, channel=channel, command="digest off", outcome="ok")
            self.align_job(channel)
            return "Digests are off for this channel." if removed else "This channel had no digest schedule."
        tz = cmd.tz or self.settings.finetune.timezone
        cron = cron_for(cmd)
        with self.sessions() as s:
            before = repos.get_digest_schedule(s, channel=channel)
            replaced = describe_schedule(before.cron, before.timezone) if before is not None else None
            repos.upsert_digest_schedule(s, channel=channel, cron=cron, timezone=tz, created_by=user)
            repos.add_audit(s, user=user, channel=channel, command=f"digest {cmd.mode} {cron} {tz}", outcome="ok")
        self.align_job(channel)
        when = cmd.time if cmd.mode == "daily" else f"{cmd.day} {cmd.time}"
        nxt = CronTrigger.from_crontab(cron, timezone=tz).get_next_fire_time(None, self.clock())
        text = f"Digest scheduled {cmd.mode} at {when} ({tz})"
        text += f"; next one {nxt:%Y-%m-%d %H:%M %Z}." if nxt else "."
        if replaced is not None and replaced != describe_schedule(cron, tz):
            text += f" This replaces the channel's {replaced} digest (one schedule per channel)."
        return escape(text)  # mrkdwn: the time zone and the schedules are values, none is markup

    # --- posting --------------------------------------------------------------------------------

    def post_now(self, channel: str) -> str | None:
        """Post a digest on demand; the message ts."""
        now = self.clock()
        return self._post(channel, slot_at=now, kind="now", scheduled_for=None, period=timedelta(days=1))

    def post_scheduled(self, channel: str) -> str | None:
        """Post the digest of the channel's latest due slot, unless some process already posted it."""
        with self.sessions() as s:
            schedule = repos.get_digest_schedule(s, channel=channel)
        if schedule is None:
            log.info("digest job for %s has no schedule any more", channel)
            return None
        now = self.clock()
        trigger = CronTrigger.from_crontab(schedule.cron, timezone=schedule.timezone)
        slot = latest_fire_time(trigger, now)
        if slot is None:
            log.warning("digest job for %s ran with no due slot", channel)
            return None
        period = timedelta(days=7) if schedule.cron.split()[4] != "*" else timedelta(days=1)
        # Each channel's digest on its own (bot.background): one that cannot be posted is retried with backoff by
        # `retry_due`, then parked and its scheduler told, never in the way of the other channels' digests.
        post = partial(self._post, channel, slot_at=slot, kind="scheduled", scheduled_for=slot, period=period)
        tell = partial(self._gave_up, channel, schedule.created_by)
        return self.items.attempt(DIGEST, channel, post, tell=tell).value

    def retry_due(self) -> int:
        """Post again the scheduled digests that failed and whose backoff is over; how many went out."""
        now = self.clock()
        due = [f.key for f in self.items.failures(kind=DIGEST) if f.parked_at is None and f.next_at <= now]
        return sum(self.post_scheduled(channel) is not None for channel in due)

    def _gave_up(self, channel: str, created_by: str, error: str) -> None:
        """The channel's digest is parked: who scheduled it hears why, in the bot's direct messages."""
        self.client.chat_postMessage(
            channel=created_by,
            text=f":no_entry: The digest of <#{escape(channel)}> could not be posted after {self.items.policy.limit} "
            f"attempts: `{escape(error[:300])}`. Invite the bot there again, or `/finetune digest off` in that "
            "channel.",
        )

    def _post(
        self, channel: str, *, slot_at: datetime, kind: str, scheduled_for: datetime | None, period: timedelta
    ) -> str | None:
        with self.sessions() as s:
            claim = repos.claim_digest_slot(s, channel=channel, slot_at=slot_at, kind=kind)
        if claim is None:
            log.info("digest %s for %s at %s was posted by another process", kind, channel, slot_at)
            return None
        try:
            now = self.clock()
            data = self.collect(channel, now=now, scheduled_for=scheduled_for, period=period)
            blocks = compose_digest(data, now)
            response = self.client.chat_postMessage(channel=channel, text=digest_fallback_text(data), blocks=blocks)
        except (SlackApiError, OSError):
            # Give the slot back so a retry (the next start, or `digest now`) is not blocked; never swallowed.
            with self.sessions() as s:
                repos.release_digest_slot(s, post_id=claim)
            log.exception("posting the digest for %s failed", channel)
            raise
        ts = str(response["ts"])
        late = scheduled_for is not None and now - scheduled_for > timedelta(minutes=5)
        with self.sessions() as s:
            repos.complete_digest_post(s, post_id=claim, message_ts=ts, late=late)
            repos.record_posted_message(s, channel=channel, ts=ts, purpose="digest")
        return ts

    # --- data -----------------------------------------------------------------------------------

    def workspace_url(self) -> str | None:
        """The workspace's base URL (from auth.test, once), to link cards without one API call per run."""
        return self._address.url()

    def collect(self, channel: str, *, now: datetime, scheduled_for: datetime | None, period: timedelta) -> DigestData:
        """Load what the digest shows in a constant number of queries."""
        base = self.workspace_url()
        with self.sessions() as s:
            since = repos.last_digest_at(s, channel=channel) or (scheduled_for or now) - period
            runs = repos.digest_runs(s, channel=channel, since=since)
            roots = repos.lineage_roots(s, run_ids=[run.id or 0 for run in runs])
            sweeps = repos.digest_sweeps(s, run_ids=[run.id or 0 for run in runs if run.kind == "sweep"])
            requests = repos.open_approval_requests(s, channel=channel)
            registered = repos.digest_registrations(s, channel=channel, since=since)
            digest_runs = [
                to_digest_run(run, base, lineage=roots.get(run.id or 0, 0), sweep=sweeps.get(run.id or 0))
                for run in runs
            ]
            approvals = [self._to_digest_approval(req, run, users, base, now) for req, run, users in requests]
            registrations = [
                DigestRegistration(
                    model=reg.model,
                    version=reg.version,
                    run_name=run.name,
                    registered_at=reg.registered_at,
                    link=archive_link(base, run.channel, run.card_ts),
                )
                for reg, run in registered
            ]
        return DigestData(
            channel=channel,
            since=since,
            runs=digest_runs,
            approvals=[a for a in approvals if a is not None],
            registrations=registrations,
            scheduled_for=scheduled_for,
            timezone=self._channel_tz(channel),
            more_link=f"{base.rstrip('/')}/archives/{escape(channel)}" if base else None,
            usage=self.usage.digest_line(channel) if self.usage is not None else None,
        )

    def _channel_tz(self, channel: str) -> str:
        with self.sessions() as s:
            schedule = next((x for x in repos.list_digest_schedules(s) if x.channel == channel), None)
        return schedule.timezone if schedule else self.settings.finetune.timezone

    def _to_digest_approval(
        self, req: ApprovalRequest, run: Run, approved_by: list[str], base: str | None, now: datetime
    ) -> DigestApproval | None:
        if req.expires_at is not None and req.expires_at <= now:
            return None
        excluded = {*approved_by, req.requester, run.requester}
        return DigestApproval(
            model=req.model,
            version=req.version,
            run_name=run.name,
            requester=req.requester,
            created_at=req.created_at,
            approved_by=approved_by,
            quorum=req.quorum,  # the quorum the request was made under
            can_still_approve=[u for u in self.settings.finetune.approvers if u not in excluded],
            link=archive_link(base, req.channel, req.message_ts),
            action=req.action,
            stage=req.stage,
        )


def to_digest_run(run: Run, base: str | None, *, lineage: int = 0, sweep: Sweep | None = None) -> DigestRun:
    """The digest's view of a stored run (a sweep's with its trial counts and best trial)."""
    metric, higher = primary_metric(run.eval_contract)
    value = run.last_metrics.get(metric)
    max_steps = run.params.get("max_steps")
    return DigestRun(
        name=run.name,
        recipe=run.recipe_name,
        status=run.status,
        requester=run.requester,
        created_at=run.created_at,
        finished_at=run.finished_at,
        link=archive_link(base, run.channel, run.card_ts),
        comparable=run.comparable,
        pinned=run.comparable or run.kind != "train",
        validation=(run.validation or {}).get("state"),
        kind=run.kind,
        confirmed=run.outputs_confirmed_at is not None,
        failure=_failure_line(run.failure),
        stuck=run.stuck_flagged_at is not None and run.finished_at is None,
        eval_contract_hash=run.eval_contract_hash,
        metric_name=metric,
        metric_value=float(value) if isinstance(value, int | float) else None,
        greater_is_better=higher,
        lineage=lineage or run.id or 0,
        step=run.last_step,
        max_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else None,
        sweep=(sweep.progress or {}) if sweep is not None else None,
        sweep_metric=sweep.metric if sweep is not None else None,
        alerts=list(((run.health or {}).get("alerted") or {}).keys()),
    )


def _failure_line(failure: dict[str, Any] | None) -> str | None:
    """`Out of GPU memory`, or `Preempted (retried as sft-tiny-…)` when a retry took over."""
    if not failure:
        return None
    title = str(failure.get("title") or failure.get("kind") or "")
    retried = failure.get("retried_as")
    return f"{title} (retried as {retried})" if retried else title
