"""ReleaseService: the release path as handlers and the watcher see it.

`checks.py` runs serving checks, `promote.py` turns a passed one into an approval request and moves the stage
at quorum, `rollback.py` restores a stage's previous holder, `ledger.py` moves and records stages,
`webhook.py` delivers each stage change, signed. Approvals are registration's (bot.registry): this service
registers the `promote` action's hooks on it and adds the stage changes to `trace`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from bot.grammar import PromoteCommand, RollbackCommand
from bot.registry import RegistrationService
from bot.registry.actions import ApprovalAction
from bot.release.checks import ServingChecks
from bot.release.ledger import StageLedger
from bot.release.promote import Promoter
from bot.release.render import stage_change_line
from bot.release.requests import ACTION, PromotionRequests, label, reissue
from bot.release.rollback import Rollbacks
from bot.release.stages import StageMover
from bot.release.webhook import Delivery, ReleaseWebhook
from bot.runs import Reply
from bot.slack.blocks import escape
from storage import repos
from storage.models import Registration

log = logging.getLogger(__name__)

# The release path's parts of a watcher tick, each isolated (bot.background).
TICK_PART = "release_tick"


class ReleaseService:
    """Promotions behind a serving check and approvals, rollbacks, and the release webhook."""

    def __init__(self, registry: RegistrationService, *, webhook: ReleaseWebhook | None = None) -> None:
        deps = registry.deps
        runs = deps.runs
        self.registry = registry
        self.ledger = StageLedger(deps)
        self.checks = ServingChecks(runs.deps, runs.thread, runs.submitter)
        self.requests = PromotionRequests(deps, self.ledger)
        self.promoter = Promoter(deps, registry.states, self.checks, self.ledger, self.requests)
        self.mover = StageMover(deps, registry.states, self.requests, self.ledger)
        self.rollbacks = Rollbacks(deps, self.ledger)
        self.checks.on_settled = self.promoter.on_settled
        settings = runs.settings.finetune
        self.webhook = webhook or ReleaseWebhook(
            url=settings.release_webhook_url,
            secret=settings.release_webhook_secret.get_secret_value() if settings.release_webhook_secret else None,
            sessions=runs.sessions,
            clock=runs.clock,
            secrets=runs.secrets,
            items=runs.deps.items,
        )
        self.webhook.items = runs.deps.items
        self.webhook.on_trouble = self._webhook_trouble
        registry.add_action(
            ACTION,
            ApprovalAction(
                digest=self.requests.fresh_digest,
                reissue=lambda request, _run: reissue(request),
                on_quorum=self.mover.maybe_apply,
                subject="the version",
                label=label,
                changed="the version changed after the request was made (its stage moved, or its serving check or "
                "artifacts changed)",
                done="promoted",
                doing="being promoted",
            ),
        )
        registry.tracer.extra_lines.append(self.trace_lines)

    def promote(self, cmd: PromoteCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """`/finetune promote MODEL:VERSION stage=S`."""
        return self.promoter.promote(cmd, user=user, channel=channel, delivery_key=delivery_key)

    def rollback(self, cmd: RollbackCommand, *, user: str, channel: str) -> Reply:
        """`/finetune rollback MODEL stage=S`."""
        return self.rollbacks.rollback(cmd, user=user, channel=channel)

    def tick(self) -> tuple[int, Delivery]:
        """A watcher tick: settle ended serving checks, move approved stages Polyaxon refused before, deliver
        due webhook events; (changes made, deliveries)."""
        # Each part on its own (bot.background): a serving check or a stage move that raises never keeps the
        # webhook's events from going out, nor the other way round.
        items = self.registry.deps.runs.deps.items
        done = items.attempt(TICK_PART, "serving_checks", self.checks.settle, parks=False).value or 0
        # A stage move Polyaxon refused again is recorded with its error and tried next tick.
        done += items.attempt(TICK_PART, "stage_moves", self.mover.retry_pending, parks=False).value or 0
        return done, self.webhook.deliver_due()

    def trace_lines(self, registration: Registration) -> list[str]:
        """Every stage change of the version, with its serving check and approvers (for `trace`)."""
        with self.registry.deps.runs.sessions() as s:
            changes = list(repos.list_stage_changes(s, model=registration.model, registration_id=registration.id))
            checks = {
                c.serving_check_id: repos.get_serving_check(s, check_id=c.serving_check_id)
                for c in changes
                if c.serving_check_id is not None
            }
            waiting = [
                r
                for r in repos.waiting_promotions(s)
                if r.model == registration.model and r.version == registration.version
            ]
        lines = []
        for change in changes:
            line = stage_change_line(
                at=change.at,
                version=change.version,
                from_stage=change.from_stage,
                to_stage=change.to_stage,
                kind=change.kind,
                actor=change.actor,
                approvers=change.approvers,
            )
            check = checks.get(change.serving_check_id) if change.serving_check_id is not None else None
            if check is not None and check.report:
                latency = (check.report.get("latency_ms") or {}).get("p95")
                line += f"; serving check #{check.id} {escape(check.status)}" + (
                    f" (p95 {latency:.0f} ms)" if isinstance(latency, int | float) else ""
                )
            lines.append(line)
        lines += [
            f"• waiting: promotion to {escape(str(r.stage))} ({escape(r.status)}, request {r.id})" for r in waiting
        ]
        return ["*Stage changes*", *lines] if lines else []

    def _webhook_trouble(self, payload: Mapping[str, Any], reason: str, given_up: bool) -> None:
        """A stage change's event did not go out: say so once in the version's thread (and when given up)."""
        with self.registry.deps.runs.sessions() as s:
            registration = repos.get_registration(
                s, model=str(payload.get("model")), version=str(payload.get("version"))
            )
            run = repos.get_run(s, run_id=registration.run_id) if registration is not None else None
        if run is None:
            return
        what = escape(f"`{payload.get('model')}:{payload.get('version')}` → {payload.get('to_stage')}")
        reason = escape(reason)  # the receiver's answer, or the error reaching it
        text = (
            f":x: The release webhook gave up on the event of {what} after many attempts: {reason}. Nothing else "
            "changes; a deployment pipeline that follows it must be told by hand."
            if given_up
            else f":warning: The release webhook did not take the event of {what}: {reason}. The stage change "
            "stands; the bot retries with backoff (same idempotency key)."
        )
        self.registry.deps.runs.thread.post_thread(run, text, purpose="release_webhook")
