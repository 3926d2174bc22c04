"""AppHome: publishes a person's Home tab when they open it (`app_home_opened`), and after what they did from it.

views.publish is rate-limited per workspace, so the tab is never published on a watcher tick: it is
refreshed when the person looks, at most once every `min_interval_s` per person, and not at all when
nothing it shows has changed since the last publish.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime

from slack_sdk import WebClient

from bot.digest.schedule import describe_schedule
from bot.grammar import Notify
from bot.home.compose import HomeData, HomeDigest, HomeRegistration, HomeRequest, HomeRun, compose_home
from bot.notify import is_notify, notify_default
from bot.slack.channels import ChannelMembers
from bot.slack.links import WorkspaceAddress
from bot.slack.people import People
from bot.slack.views import publish_home
from storage import repos
from storage.db import SessionFactory
from storage.models import ApprovalRequest, Run

MIN_INTERVAL_S = 5.0
MAX_USERS = 10_000  # published digests kept (an LRU): the newest per person
MAX_DIGEST_CHANNELS = 20  # channel memberships asked per publish (conversations.members)


class AppHome:
    """Collects what a person's Home tab shows and publishes it."""

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        client: WebClient,
        people: People,
        clock: Callable[[], datetime],
        polyaxon: bool,
        min_interval_s: float = MIN_INTERVAL_S,
        members: ChannelMembers | None = None,
    ) -> None:
        self.sessions = sessions
        self.client = client
        self.people = people
        self.clock = clock
        self.polyaxon = polyaxon
        self.min_interval_s = min_interval_s
        self.members = members or ChannelMembers()
        self.address = WorkspaceAddress(client)
        self._published: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._publishing = threading.Lock()

    def publish(self, user: str, *, force: bool = False) -> bool:
        """Publish the user's tab unless it was published moments ago or would show the same; whether it was."""
        # One publish at a time: two openings at once would otherwise both find the tab changed and publish twice.
        with self._publishing:
            now = time.monotonic()
            last = self._published.get(user)
            if last is not None and not force and now - last[0] < self.min_interval_s:
                return False
            view = compose_home(self.collect(user))
            digest = hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()
            if last is not None and last[1] == digest:
                return False
            publish_home(self.client, user, view)
            self._published[user] = (now, digest)
            self._published.move_to_end(user)
            while len(self._published) > MAX_USERS:
                self._published.popitem(last=False)
            return True

    def set_notify(self, user: str, value: object) -> Notify | None:
        """Store the person's default way to hear of their runs; None (nothing stored) unless `value` is one of the
        three: it comes back from a select the bot rendered, and is checked again, never trusted."""
        if not is_notify(value):
            return None
        with self.sessions() as s:
            repos.set_notify_preference(s, user=user, notify=value)
            repos.add_audit(s, user=user, command=f"home notify={value}", outcome="ok")
        return value

    def collect(self, user: str) -> HomeData:
        """Everything the tab shows, in a few queries and at most MAX_DIGEST_CHANNELS Slack reads."""
        approvers = self.people.approvers()
        with self.sessions() as s:
            runs = [r for r in repos.list_active_runs(s, requester=user) if r.sweep_id is None]
            requests = repos.open_approval_requests(s, channel=None, limit=200)
            registered = repos.registrations_of(s, user=user)
            schedules = repos.list_digest_schedules(s)
        now = self.clock()
        waiting = [
            self._request(req, run, approved, mine=req.requester == user)
            for req, run, approved in requests
            if (req.expires_at is None or req.expires_at > now)
            and (req.requester == user or (user in approvers and user not in approved and run.requester != user))
        ]
        return HomeData(
            user=user,
            runs=[self._run(run) for run in runs],
            requests=waiting,
            registrations=[
                HomeRegistration(
                    model=reg.model,
                    version=reg.version,
                    run_name=run.name,
                    registered_at=reg.registered_at,
                    link=self.address.message(run.channel, run.card_ts),
                )
                for reg, run in registered
            ],
            digests=[
                HomeDigest(channel=x.channel, schedule=describe_schedule(x.cron, x.timezone))
                for x in schedules[:MAX_DIGEST_CHANNELS]
                if self._is_member(user, x.channel)
            ],
            now=now,
            polyaxon=self.polyaxon,
            notify=notify_default(self.sessions, user),
        )

    def _run(self, run: Run) -> HomeRun:
        max_steps = run.params.get("max_steps")
        return HomeRun(
            name=run.name,
            recipe=run.recipe_name,
            status=run.status,
            channel=run.channel,
            kind=run.kind,
            step=run.last_step,
            max_steps=max_steps if isinstance(max_steps, int) else None,
            link=self.address.message(run.channel, run.card_ts),
        )

    def _request(self, req: ApprovalRequest, run: Run, approved: list[str], *, mine: bool) -> HomeRequest:
        subject = f"{req.model}:{req.version}" if req.version else req.model
        if req.action in ("skip_preflight", "budget"):  # a held run: the run is what is approved
            subject = run.name
        if req.action == "promote" and req.stage:
            subject = f"{subject} → {req.stage}"
        return HomeRequest(
            action=req.action,
            subject=subject,
            run_name=run.name,
            channel=req.channel,
            requester=req.requester,
            approvals=len(approved),
            quorum=req.quorum,
            mine=mine,
            link=self.address.message(req.channel, req.message_ts),
            expires_at=req.expires_at,
        )

    def _is_member(self, user: str, channel: str) -> bool:
        """Whether the user is in the channel; False when Slack cannot say (the digest is then not listed)."""
        return self.members.is_member(self.client, channel=channel, user=user) is True
