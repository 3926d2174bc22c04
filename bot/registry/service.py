"""RegistrationService: approval-gated registration as handlers and the watcher see it.

`register.py` makes a request, `reactions.py` judges reactions on it, `states.py` reopens, expires and voids
it, `registration.py` registers at quorum (exactly once) and `trace.py` shows the chain afterwards. The policy
is pure, in `policy.py`. This class only builds the parts on one `RegistryDeps` and hands work to them.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.grammar import RegisterCommand, RunCommand, TraceCommand
from bot.registry.actions import ApprovalAction
from bot.registry.budget import ACTION as BUDGET
from bot.registry.budget import BudgetHolds
from bot.registry.candidate import fresh_digest
from bot.registry.deps import RegistryDeps
from bot.registry.holds import held_digest
from bot.registry.reactions import ReactionJudge
from bot.registry.register import RequestMaker
from bot.registry.registration import Registrar
from bot.registry.skip import ACTION as SKIP
from bot.registry.skip import SkipRequests, ask_again, skip_digest
from bot.registry.states import RequestStates
from bot.registry.trace import Tracer
from bot.runs import Reply, RunService
from bot.slack.blocks import escape
from storage.models import ApprovalRequest

REGISTER = "register"


def registration_label(request: ApprovalRequest) -> str:
    """A registration request's subject: the model, and its version once registered."""
    registered = request.status == "registered" and request.version
    return f"`{escape(request.model)}:{escape(str(request.version))}`" if registered else f"`{escape(request.model)}`"


if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonGateway
    from bot.usage import UsageService


class RegistrationService:
    """Posts approval requests, judges reactions on them, registers approved candidates, traces versions."""

    def __init__(
        self,
        runs: RunService,
        *,
        criteria_dir: Path | None = None,
        gateway: PolyaxonGateway | None = None,
        usage: UsageService | None = None,
    ) -> None:
        settings = runs.settings.finetune
        self.deps = RegistryDeps(
            runs=runs,
            gateway=gateway or runs.gateway,
            criteria_dir=criteria_dir or Path(settings.catalog_dir) / "criteria",
            reaction=settings.approval_reaction,
            quorum=settings.approval_quorum,
            ttl=timedelta(hours=settings.approval_ttl_hours),
        )
        self.states = RequestStates(self.deps)
        self.registrar = Registrar(self.deps, self.states)
        self.requests = RequestMaker(self.deps, self.states)
        self.skips = SkipRequests(self.deps)
        self.usage = usage
        self.budget_holds = BudgetHolds(self.deps)
        self.add_action(
            REGISTER,
            ApprovalAction(
                digest=lambda _request, run: fresh_digest(self.deps, run),
                reissue=lambda request, run: f"/finetune register {run.name} model={request.model}",
                on_quorum=self.registrar.maybe_register,
                label=lambda r: (
                    f"`{escape(r.model)}:{escape(r.version)}`"
                    if r.status == "registered" and r.version
                    else f"`{escape(r.model)}`"
                ),
            ),
        )
        self.add_action(
            SKIP,
            ApprovalAction(
                digest=lambda _request, run: skip_digest(run),
                reissue=lambda _request, run: ask_again(run),
                on_quorum=self.skips.release,
                subject="the held run",
                changed="the held run changed after it was made (cancelled or re-planned)",
                on_expired=self.skips.expired,
                done="approved",
                doing="being submitted",
            ),
        )
        self.add_action(
            BUDGET,
            ApprovalAction(
                digest=lambda _request, run: held_digest(run),
                reissue=lambda _request, run: self.budget_holds.reissue(run),
                on_quorum=self.budget_holds.release,
                subject="the held run",
                changed="the held run changed after it was made (cancelled or re-planned)",
                on_expired=self.budget_holds.expired,
                done="approved",
                doing="being submitted",
            ),
        )
        self.reactions = ReactionJudge(self.deps, self.states)
        self.tracer = Tracer(self.deps)

    def add_action(self, name: str, action: ApprovalAction) -> None:
        """Let requests of `name` be judged by these rules (a promotion's hooks come from bot.release)."""
        self.deps.actions[name] = action

    @property
    def gateway(self) -> PolyaxonGateway:
        """The Polyaxon gateway registration talks to (tests swap it to simulate an outage)."""
        return self.deps.gateway

    @gateway.setter
    def gateway(self, gateway: PolyaxonGateway) -> None:
        self.deps.gateway = gateway

    @property
    def quorum(self) -> int:
        """Distinct approvals a new request needs (a request keeps the quorum it was made under)."""
        return self.deps.quorum

    @quorum.setter
    def quorum(self, quorum: int) -> None:
        self.deps.quorum = quorum

    def register(self, cmd: RegisterCommand, *, user: str, channel: str) -> Reply:
        """`/finetune register RUN model=NAME`."""
        return self.requests.register(cmd, user=user, channel=channel)

    def skip_preflight(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """`/finetune run … --skip-preflight`: hold the run for approvers (registration's rules)."""
        return self.skips.request(cmd, user=user, channel=channel, delivery_key=delivery_key)

    def submit_run(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """A `run` (typed, or from the run form): held for approvers when it skips its preflight or its estimate
        would take the channel over its budget; submitted otherwise."""
        if cmd.skip_preflight:
            return self.skip_preflight(cmd, user=user, channel=channel, delivery_key=delivery_key)
        runs = self.deps.runs
        budgeted = self.usage is not None and self.usage.has_budget(channel)
        if self.usage is not None and budgeted:
            # Planned here only where a budget may hold it: elsewhere `submit` plans it once.
            plan = runs.submitter.plan(cmd)
            # A delivery carried out again finds its run started already: never held for the second time.
            started = runs.submitter.existing(plan, delivery_key) is not None
            verdict = self.usage.verdict(plan, channel=channel)
            if verdict.over and not started:
                return self.budget_holds.request(cmd, verdict, user=user, channel=channel, delivery_key=delivery_key)
        reply = runs.submit(cmd, user=user, channel=channel, delivery_key=delivery_key)
        if self.usage is not None and budgeted:
            self.usage.notify_if_near(channel)
        return reply

    def on_reaction(self, event: dict[str, Any]) -> None:
        """Judge one reaction_added / reaction_removed; reactions unrelated to approval requests are ignored."""
        self.reactions.on_reaction(event)

    def trace(self, cmd: TraceCommand) -> Reply:
        """`/finetune trace MODEL[:VERSION]`."""
        return self.tracer.trace(cmd)

    def expire_due(self) -> int:
        """Close every open request past its expiry (a watcher tick); how many were closed now."""
        return self.states.expire_due()

    def retry_pending(self) -> int:
        """Register requests left approved or claimed by a process that died, and submit held runs whose skip
        was granted by one; how many now."""
        return self.registrar.retry_pending() + self.skips.retry_pending() + self.budget_holds.retry_pending()
