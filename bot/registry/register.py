"""`/finetune register`: an approval request for a succeeded run's candidate, with every criterion and its evidence."""

from __future__ import annotations

from bot.grammar import RegisterCommand
from bot.registry.candidate import current_version, read_candidate
from bot.registry.deps import RegistryDeps
from bot.registry.policy import CriteriaError, evaluate_criteria, load_criteria
from bot.registry.render import render_request
from bot.registry.states import RequestStates
from bot.runs import Reply, RunError
from bot.runs.admit import find_run_for
from bot.runs.kinds import Verb
from bot.slack.blocks import escape
from storage import repos


class RequestMaker:
    """Posts one request message per candidate (in the run's thread, sent to the channel) and records it."""

    def __init__(self, deps: RegistryDeps, states: RequestStates) -> None:
        self.deps = deps
        self.states = states

    def register(self, cmd: RegisterCommand, *, user: str, channel: str) -> Reply:
        """Post an approval request for a succeeded run's candidate, with every criterion and its evidence."""
        from bot.polyaxon import GatewayError, PolyaxonUnreachableError

        deps, runs = self.deps, self.deps.runs
        run = find_run_for(runs.sessions, cmd.run, Verb.REGISTER)
        if run.status != "succeeded" or not run.polyaxon_uuid:
            raise RunError(
                f"run `{escape(run.name)}` is {escape(run.status)}: only a run that succeeded can be registered"
            )
        if cmd.version is not None:
            with runs.sessions() as s:
                taken = repos.get_registration(s, model=cmd.model, version=cmd.version)
            if taken is not None:
                raise RunError(
                    f"`{escape(cmd.model)}:{escape(str(cmd.version))}` is registered already; choose another `version=`"
                )
        try:
            criteria = load_criteria(deps.criteria_dir, cmd.model)
        except CriteriaError as exc:
            raise RunError(f"the registration criteria can't be read: {escape(str(exc))}") from exc
        try:
            candidate, _ = read_candidate(deps, run)
        except PolyaxonUnreachableError:
            raise  # told as the outage it is, by the command's one answer to an outage
        except GatewayError as exc:
            raise RunError(
                f"Polyaxon is unreachable, so the candidate of `{escape(run.name)}` can't be read: {deps.redact(exc)}. "
                "Nothing was requested; try again."
            ) from exc
        digest = candidate.digest()
        now = runs.clock()
        with runs.sessions() as s:
            earlier = list(repos.list_approval_requests(s, statuses=["open"], run_id=run.id, model=cmd.model))
        for old in earlier:
            if old.expires_at is not None and old.expires_at <= now:
                self.states.expire(old, run)
            elif old.candidate_digest == digest:
                link = runs.thread.permalink(old.channel, old.message_ts)
                where = f"<{link}|the open request>" if link else "the open request"
                raise RunError(
                    f"`{escape(run.name)}` already has an open request for `{escape(cmd.model)}`: react on {where}"
                )
            else:
                self.states.void(old, run, new_digest=digest)
        results = evaluate_criteria(criteria, candidate, current_version(deps, cmd.model))
        expires_at = now + deps.ttl
        blocks = render_request(
            model=cmd.model,
            version=cmd.version,
            candidate=candidate,
            results=results,
            criteria_label=f"{criteria.source} v{criteria.version}",
            requester=user,
            run_requester=run.requester,
            reaction=deps.reaction,
            quorum=deps.quorum,
            expires_at=expires_at,
        )
        passed = sum(r.passed for r in results)
        text = (
            f"Approval request: register `{escape(run.name)}` as {escape(cmd.model)} "
            f"({passed}/{len(results)} criteria pass)"
        )
        # In the thread, and sent to the channel.
        ts = runs.thread.post_thread(run, text, purpose="approval_request", blocks=blocks, broadcast=True)
        thread_ts = run.thread_ts or ts
        with runs.sessions() as s:
            request = repos.create_approval_request(
                s,
                run_id=run.id,
                model=cmd.model,
                version=cmd.version,
                requester=user,
                channel=run.channel,
                message_ts=ts,
                thread_ts=thread_ts,
                checkpoint_path=candidate.checkpoint_path,
                candidate_digest=digest,
                criteria=[r.model_dump() for r in results],
                criteria_version=f"{criteria.source}@{criteria.version}",
                status="open",
                expires_at=expires_at,
                candidate=candidate.model_dump(),
                quorum=deps.quorum,
            )
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"register {run.name} model={cmd.model}" + (f" version={cmd.version}" if cmd.version else ""),
                outcome="ok",
                detail=f"approval request {request.id}: {passed}/{len(results)} criteria pass",
                run_id=run.id,
            )
        link = runs.thread.permalink(run.channel, ts)
        where = f"<{link}|approval request>" if link else "approval request"
        return Reply(
            text=f"Posted the {where} for `{escape(cmd.model)}` in the thread of `{escape(run.name)}`: "
            f"{deps.quorum} approval(s) with :{deps.reaction}: from approvers register it."
        )
