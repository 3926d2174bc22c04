"""Approval by reaction: what one `reaction_added` / `reaction_removed` on an approval request means, and acting on it.

The policy (who may approve, which emoji, where) is pure (`policy.judge_reaction`); this part binds it to the
request rows, the approvals table, the audit log and the run's thread. Anything that is not an approval is
ignored for the count, audited, and answered once in the thread with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from bot.registry.actions import ApprovalAction
from bot.registry.deps import RegistryDeps
from bot.registry.policy import RequestView, Verdict, judge_reaction
from bot.registry.states import RequestStates
from bot.runs.admit import kind_answer
from bot.runs.kinds import Verb
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import ApprovalRequest, Run

if TYPE_CHECKING:
    from sqlmodel import Session

_SKIN_TONE = re.compile(r"::skin-tone-\d$")


# Quorum reached and the action under way: the count is closed; once carried out, it is closed for good.
IN_FLIGHT = ("approved", "registering", "promoting")
DONE = {"registered": "registered", "promoted": "registered", "granted": "granted"}


def _view_status(status: str) -> Any:
    return "registering" if status in IN_FLIGHT else DONE.get(status, status)


def cancelled(run: Run) -> str | None:
    """Why a request on this run is void whatever its digest says: the run ended before it reached Polyaxon."""
    if run.status in repos.TERMINAL_STATUSES and run.polyaxon_uuid is None:
        return f"its run `{escape(run.name)}` was {escape(run.status)} before it reached Polyaxon"
    return None


def requests_of_post(s: Session, run_id: int) -> tuple[Sequence[ApprovalRequest], bool]:
    """The open requests a post about this run bears on, and whether it is a serving check's post: a check posts in
    its version's thread, the evidence of the promotion requests that cite it (on the version's run, not its own)."""
    check = repos.serving_check_for_run(s, run_id=run_id)
    if check is None:
        return repos.list_approval_requests(s, statuses=["open"], run_id=run_id), False
    requests = repos.list_approval_requests(s, statuses=["open"], model=check.model)
    return [r for r in requests if (r.candidate or {}).get("serving_check_id") == check.id], True


def not_by_reaction(user: str, reaction: str, label: str) -> str:
    """Why the approval emoji on a serving check's report counts for nothing, and where it counts instead."""
    return (
        f"{mention(user)}: a serving check is not approved by reaction (the bot judges its report against the "
        f"recipe's budgets), so :{escape(reaction)}: on it counts for nothing. Approvals count only on the request "
        f"to promote {label} in this thread."
    )


class ReactionJudge:
    """Judges reactions on approval requests; an approval that completes a quorum calls `on_quorum`."""

    def __init__(self, deps: RegistryDeps, states: RequestStates) -> None:
        self.deps = deps
        self.states = states

    def on_reaction(self, event: dict[str, Any]) -> None:
        """Judge one reaction_added / reaction_removed; reactions unrelated to approval requests are ignored."""
        item = event.get("item") or {}
        if item.get("type") != "message":
            return
        added = event.get("type") == "reaction_added"
        channel, ts = str(item.get("channel") or ""), str(item.get("ts") or "")
        user = str(event.get("user") or "")
        reaction = _SKIN_TONE.sub("", str(event.get("reaction") or ""))
        if not user or user == self.deps.bot_user():
            return
        with self.deps.runs.sessions() as s:
            request = repos.get_approval_request_by_message(s, channel=channel, message_ts=ts)
            on_request = request is not None
            on_check = False
            if request is None:
                # The approval emoji on another of the bot's messages of a run with an open request (or on a
                # serving check's report, cited by its version's request): tell them, once, where approvals count.
                # Anything else is none of the bot's business.
                posted = repos.get_posted_message(s, channel=channel, ts=ts)
                if not added or reaction != self.deps.reaction or posted is None or posted.run_id is None:
                    return
                open_requests, on_check = requests_of_post(s, posted.run_id)
                if not open_requests:
                    orphan = repos.get_run(s, run_id=posted.run_id)
                    if orphan is not None:
                        self.no_request(orphan, user=user, reaction=reaction, channel=channel)
                    return
                request = open_requests[-1]
            run = repos.get_run(s, run_id=request.run_id)
            approved = {a.user for a in repos.active_approvals(s, request_id=request.id or 0)}
        hooks = self.deps.action(request.action)
        if run is None or hooks is None:
            return
        if (
            not added
            and on_request
            and reaction == self.deps.reaction
            and user in approved
            and request.status == "approved"
            and self.states.reopen(request)
        ):
            # Quorum was reached but registration has not started (Polyaxon was down): the removal still
            # comes before registration, so it revokes, and the request waits for its quorum again.
            request.status = "open"
        verdict = self.judge(
            request, run, hooks, added=added, on_request=on_request, user=user, reaction=reaction, approved=approved
        )
        if on_check and verdict.code == "wrong_message":
            verdict = verdict.model_copy(update={"reason": not_by_reaction(user, reaction, hooks.label(request))})
        if verdict.counts:
            fresh = hooks.digest(request, run)
            if fresh is not None and fresh != request.candidate_digest:
                self.states.void(request, run, new_digest=fresh)
                verdict = self.judge(
                    request,
                    run,
                    hooks,
                    added=added,
                    on_request=on_request,
                    user=user,
                    reaction=reaction,
                    approved=approved,
                    current_digest=fresh,
                )
        self.act(request, run, hooks, verdict, added=added, user=user, reaction=reaction)

    def judge(
        self,
        request: ApprovalRequest,
        run: Run,
        hooks: ApprovalAction,
        *,
        added: bool,
        on_request: bool,
        user: str,
        reaction: str,
        approved: set[str],
        current_digest: str | None = None,
    ) -> Verdict:
        view = RequestView(
            status=_view_status(request.status),
            requester=request.requester,
            run_requester=run.requester,
            expires_at=request.expires_at,
            candidate_digest=request.candidate_digest,
            current_digest=current_digest,
            reissue=f"`{escape(hooks.reissue(request, run))}`",
            subject=hooks.subject,
            voided_because=cancelled(run) if request.status == "voided" else None,
        )
        return judge_reaction(
            added=added,
            request=view,
            on_request_message=on_request,
            user=user,
            reaction=reaction,
            approval_reaction=self.deps.reaction,
            approvers=self.deps.runs.people.approvers(),
            already_approved=approved,
            now=self.deps.runs.clock(),
        )

    def act(
        self,
        request: ApprovalRequest,
        run: Run,
        hooks: ApprovalAction,
        verdict: Verdict,
        *,
        added: bool,
        user: str,
        reaction: str,
    ) -> None:
        request_id = request.id or 0
        label = hooks.label(request)
        shown = escape(reaction)  # a reaction's name is the sender's to choose
        verb = "reaction_added" if added else "reaction_removed"
        outcome = "ignored"
        progress: str | None = None
        reason = verdict.reason
        if verdict.code == "counts":
            with self.deps.runs.sessions() as s:
                try:
                    recorded = repos.add_approval(
                        s, request_id=request_id, user=user, reaction=reaction, message_ts=request.message_ts or ""
                    )
                    s.commit()
                except IntegrityError:  # the same approval, recorded by a concurrent delivery
                    s.rollback()
                    recorded = None
            if recorded is None:  # a concurrent event for the same reaction recorded it first
                verdict = Verdict(code="duplicate")
            else:
                outcome = "ok"
                with self.deps.runs.sessions() as s:
                    count = len(repos.active_approvals(s, request_id=request_id))
                progress = f":{self.deps.reaction}: {mention(user)} approved {label} ({count}/{request.quorum})."
        elif verdict.code == "revokes":
            with self.deps.runs.sessions() as s:
                revoked = repos.revoke_approval(s, request_id=request_id, user=user)
                count = len(repos.active_approvals(s, request_id=request_id))
            if revoked is not None:
                outcome = "ok"
                progress = (
                    f":leftwards_arrow_with_hook: {mention(user)} withdrew their approval of {label} "
                    f"({count}/{request.quorum})."
                )
        elif verdict.code == "expired" and request.status == "open":
            self.states.expire(request, run)
        elif verdict.code == "closed" and request.status in DONE:
            reason = (
                f"{mention(user)} removed :{shown}: after it was {hooks.done}: {label} stays {hooks.done}"
                if not added
                else f"{label} is {hooks.done} already: {mention(user)}'s :{shown}: changes nothing"
            )
        elif verdict.code == "closed" and added and request.status in IN_FLIGHT:
            reason = f"{label} has its approvals and is {hooks.doing}: {mention(user)}'s :{shown}: is not needed"
        elif verdict.code == "closed" and not added and request.status in IN_FLIGHT:
            # The action is in flight: too late to withdraw (an approved request is reopened above).
            reason = f"{mention(user)} removed :{shown}: while {label} was {hooks.doing}: the approval stands for it"
        with self.deps.runs.sessions() as s:
            repos.add_audit(
                s,
                user=user,
                channel=request.channel,
                command=f"{verb} :{reaction}: on approval request {request_id}",
                outcome=outcome,
                detail=verdict.code + (f": {reason}" if reason else ""),
                run_id=run.id,
            )
        if progress is not None:
            self.deps.runs.thread.post_thread(run, progress, purpose="approval")
        if reason and self.deps.first_notice(request_id, user, verdict.code):
            self.deps.runs.thread.post_thread(run, f":information_source: {reason}", purpose="approval_notice")
        if outcome == "ok":
            # An approval may complete the quorum; so may a revocation on a reopened request that kept it.
            hooks.on_quorum(request_id)

    def no_request(self, run: Run, *, user: str, reaction: str, channel: str) -> None:
        """The approval emoji on a run's card or thread with no open request: tell the reactor (only them), by the
        run's kind: how to ask for a registration, or why this kind of run has nothing to approve."""
        answer = kind_answer(self.deps.runs.sessions, run, Verb.APPROVE, reaction=reaction)
        shown = escape(reaction)  # a reaction's name is the sender's to choose
        with self.deps.runs.sessions() as s:
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"reaction_added :{reaction}: on {run.name}",
                outcome="ignored",
                detail="no open approval request" if answer is None else f"{run.kind}: nothing to approve",
                run_id=run.id,
            )
        text = answer or (
            f"`{escape(run.name)}` has no open approval request, so :{shown}: approves nothing. "
            f"A registration starts with `/finetune register {escape(run.name)} model=NAME`; "
            "approvals count only on the request message it posts."
        )
        self.deps.runs.client.chat_postEphemeral(
            channel=run.channel, user=user, thread_ts=run.thread_ts, text=f":information_source: {text}"
        )
