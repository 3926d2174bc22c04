"""The run lifecycle behind `/finetune run|status|logs|stop|resume|compare`: catalog -> gateway -> storage -> card.

Handlers adapt Slack payloads to these calls; the watcher (handlers/watcher.py) reuses the card and thread
helpers. Every reply is a `Reply`; user errors are `RunError` (short, specific, nothing changed).
"""

from __future__ import annotations

import difflib
import hashlib
import io
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import context, escape, header, section
from bot.cards import CardView, card_text, render_card
from bot.digest import primary_metric
from bot.grammar import CommandError, CompareCommand, ResumeCommand, RunCommand
from bot.redact import cap_tail, redact
from bot.settings import Settings
from storage import repos
from storage.db import SessionFactory
from storage.models import Run

if TYPE_CHECKING:
    from bot.catalog import Catalog, Plan
    from bot.polyaxon import PolyaxonGateway

log = logging.getLogger(__name__)

TERMINAL = repos.TERMINAL_STATUSES
CARD_UPDATE_MIN_INTERVAL_S = 3.0  # Slack allows about one chat.update per second per channel; stay well under
INLINE_LOG_BYTES = 3500


# Message metadata on each status post: how a restarted bot tells whether a post went out before a crash.
TRANSITION_EVENT = "finetune_status_event"


def transition_metadata(event_id: int, status: str) -> dict[str, Any]:
    """Slack message metadata naming the status event a thread post tells."""
    return {"event_type": TRANSITION_EVENT, "event_payload": {"event_id": event_id, "status": status}}


class RunError(CommandError):
    """A user error about runs (unknown run, not allowed, incompatible resume); nothing was changed.

    Its messages mention people (<@U…>); run references in them passed the grammar's run-ref check.
    """

    mrkdwn = True


class Reply(BaseModel):
    """What the handler sends back to the user (ephemeral unless said otherwise)."""

    text: str
    blocks: list[dict[str, Any]] = Field(default_factory=list)

    def as_blocks(self) -> list[dict[str, Any]]:
        """The blocks, or the text as one section."""
        return self.blocks or [section(self.text)]


def run_name_for(recipe: str, key: str) -> str:
    """The Polyaxon run name (a slug) for a submission: the recipe plus a digest of the delivery key."""
    return f"{recipe}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


class RunService:
    """Submits, reports on, stops, resumes and compares runs; owns each run's card and thread."""

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
        self.settings = settings
        self.sessions = sessions
        self.catalog = catalog
        self.gateway = gateway
        self.client = client
        self.clock = clock
        self._card_updated: dict[int, float] = {}
        self._group_cache: dict[str, tuple[float, set[str]]] = {}
        self._lock = threading.Lock()
        self.secrets = [
            s.get_secret_value()
            for s in (
                settings.slack.bot_token,
                settings.slack.signing_secret,
                settings.slack.app_token,
                settings.polyaxon.auth_token,
            )
            if s is not None
        ]

    # --- people -----------------------------------------------------------------------------------

    def members(self, ids: Sequence[str]) -> set[str]:
        """User IDs of `ids`, with S… user groups resolved through usergroups.users.list (cached 5 min)."""
        users: set[str] = set()
        for ident in ids:
            if not ident.startswith("S"):
                users.add(ident)
                continue
            cached = self._group_cache.get(ident)
            if cached and time.monotonic() - cached[0] < 300:
                users |= cached[1]
                continue
            resp = self.client.usergroups_users_list(usergroup=ident)
            group = set(resp.get("users") or [])
            self._group_cache[ident] = (time.monotonic(), group)
            users |= group
        return users

    def may_run(self, user: str) -> bool:
        """Whether `user` may submit runs (FINETUNE_RUNNERS empty = everyone in the channel)."""
        runners = self.settings.finetune.runners
        return not runners or user in self.members(runners)

    def approvers(self) -> set[str]:
        """Everyone in FINETUNE_APPROVERS, groups resolved."""
        return self.members(self.settings.finetune.approvers)

    # --- submit -----------------------------------------------------------------------------------

    def plan(self, cmd: RunCommand) -> Plan:
        """Compile the command (PlanError for anything the catalog refuses)."""
        return self.catalog.plan(cmd)

    def submit(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """Plan, authorise, record, post the card, submit; failures are told in the card's thread."""
        if not self.may_run(user):
            raise RunError(f"<@{user}> may not start runs here; ask someone in FINETUNE_RUNNERS")
        plan = self.plan(cmd)
        name = run_name_for(plan.recipe, delivery_key)
        with self.sessions() as s:
            existing = repos.get_run_by_name(s, name=name)
            if existing is not None:  # the same delivery again: nothing new
                return Reply(text=f"Run `{name}` is already submitted.")
            run = repos.create_run(
                s,
                name=name,
                recipe_name=plan.recipe,
                recipe_hash=plan.recipe_hash,
                component=plan.component,
                params=plan.params,
                overrides=dict(cmd.overrides),
                presets=plan.presets,
                pins=plan.pins,
                comparable=plan.comparable,
                eval_contract=plan.eval_contract,
                eval_contract_hash=plan.eval_contract_hash,
                requester=user,
                channel=channel,
                status="submitting",
            )
            repos.add_audit(
                s, user=user, channel=channel, command=f"run recipe={plan.recipe}", outcome="ok", run_id=run.id
            )
        self.post_card(run)
        for warning in plan.warnings:
            self.post_thread(run, f":warning: {escape(warning)}", purpose="warning")
        self.submit_to_polyaxon(run, plan.operation, plan.tags)
        return Reply(text=f"Planned {plan.recipe} as `{name}`; the card is in <#{channel}>.")

    def submit_to_polyaxon(self, run: Run, operation: dict[str, Any], tags: Sequence[str]) -> bool:
        """Submit (idempotent on the run name); on failure the run waits in `pending_submit` and is retried."""
        from bot.polyaxon import GatewayError

        try:
            info = self.gateway.submit(
                operation,
                name=run.name,
                tags=list(tags),
                description=f"/finetune run recipe={run.recipe_name} by {run.requester}",
            )
        except GatewayError as exc:
            first = run.status != "pending_submit"
            with self.sessions() as s:
                fresh = self._reload(s, run)
                repos.update_run(
                    s,
                    fresh,
                    status="pending_submit",
                    last_activity_at=self.clock(),
                    pending_operation={"operation": operation, "tags": list(tags)},
                )
                run = fresh
            if first:
                self.post_thread(
                    run,
                    f":warning: Polyaxon did not take the run: {escape(redact(str(exc), extra_secrets=self.secrets))}\n"
                    "The bot retries the submission on every watcher tick (same run name, so never twice); "
                    "`/finetune stop` cancels it.",
                    purpose="submit_error",
                )
            self.update_card(run, force=True)
            return False
        self.transition(
            run,
            status=info.status or "created",
            message="submitted to Polyaxon",
            text=f"Submitted to Polyaxon as `{info.uuid}` ({info.status}).",
            polyaxon_uuid=info.uuid,
            pending_operation=None,
            last_activity_at=self.clock(),
        )
        return True

    def retry_pending(self) -> int:
        """Retry submissions that failed because Polyaxon was unreachable; how many went through."""
        with self.sessions() as s:
            pending = [r for r in repos.list_active_runs(s) if r.status == "pending_submit"]
        done = 0
        for run in pending:
            op = run.pending_operation
            if op is not None and self.submit_to_polyaxon(run, op["operation"], op.get("tags", [])):
                done += 1
        return done

    # --- card and thread --------------------------------------------------------------------------

    def card_view(self, run: Run) -> CardView:
        """The card's content for a stored run."""
        parent_name = parent_link = None
        if run.parent_run_id is not None:
            with self.sessions() as s:
                parent = repos.get_run(s, run_id=run.parent_run_id)
            if parent is not None:
                parent_name = parent.name
                parent_link = self.permalink(parent.channel, parent.card_ts)
        metrics = {k: float(v) for k, v in run.last_metrics.items() if isinstance(v, int | float)}
        max_steps = run.params.get("max_steps")
        return CardView(
            name=run.name,
            uuid=run.polyaxon_uuid,
            recipe=run.recipe_name,
            recipe_hash=run.recipe_hash,
            presets=run.presets,
            pins={k: v for k, v in run.pins.items() if k in {"model", "dataset", "image", "code"}},
            comparable=run.comparable,
            requester=run.requester,
            status=run.status,
            step=run.last_step,
            max_steps=int(max_steps) if isinstance(max_steps, int) and max_steps > 0 else None,
            metrics=metrics,
            polyaxon_url=self.polyaxon_url(run),
            parent_name=parent_name,
            parent_link=parent_link,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )

    def polyaxon_url(self, run: Run) -> str | None:
        """The run's page in Polyaxon's UI."""
        host = self.settings.polyaxon.host
        if not host or not run.polyaxon_uuid:
            return None
        return f"{host}/ui/{self.settings.polyaxon.owner}/{self.settings.polyaxon.project}/runs/{run.polyaxon_uuid}"

    def permalink(self, channel: str, ts: str | None) -> str | None:
        """A message's permalink (chat.getPermalink), or None."""
        if not ts:
            return None
        try:
            return str(self.client.chat_getPermalink(channel=channel, message_ts=ts).get("permalink") or "") or None
        except SlackApiError:
            return None

    def post_card(self, run: Run) -> None:
        """Post the run's one card in the channel and remember its ts (the thread for everything else)."""
        view = self.card_view(run)
        resp = self.client.chat_postMessage(channel=run.channel, text=card_text(view), blocks=render_card(view))
        ts = str(resp["ts"])
        with self.sessions() as s:
            fresh = self._reload(s, run)
            repos.update_run(s, fresh, card_ts=ts, thread_ts=ts)
            repos.record_posted_message(s, channel=run.channel, ts=ts, purpose="card", run_id=run.id)
        run.card_ts = run.thread_ts = ts
        with self._lock:
            self._card_updated[run.id or 0] = time.monotonic()

    def update_card(self, run: Run, *, force: bool = False) -> bool:
        """Edit the card in place (chat.update), at most once every few seconds unless `force`."""
        if not run.card_ts:
            return False
        key = run.id or 0
        with self._lock:
            last = self._card_updated.get(key, 0.0)
            if not force and time.monotonic() - last < CARD_UPDATE_MIN_INTERVAL_S:
                return False
            self._card_updated[key] = time.monotonic()
        view = self.card_view(run)
        self.client.chat_update(channel=run.channel, ts=run.card_ts, text=card_text(view), blocks=render_card(view))
        return True

    def post_thread(
        self,
        run: Run,
        text: str,
        *,
        purpose: str,
        blocks: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Post in the run's thread (never a new top-level message); the message ts."""
        kwargs: dict[str, Any] = {"channel": run.channel, "thread_ts": run.thread_ts or run.card_ts, "text": text}
        if blocks:
            kwargs["blocks"] = blocks
        if metadata:
            kwargs["metadata"] = metadata
        resp = self.client.chat_postMessage(**kwargs)
        ts = str(resp["ts"])
        with self.sessions() as s:
            repos.record_posted_message(
                s, channel=run.channel, ts=ts, purpose=purpose, run_id=run.id, thread_ts=run.thread_ts
            )
        return ts

    def transition(
        self,
        run: Run,
        *,
        status: str,
        text: str,
        message: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
        at: datetime | None = None,
        **fields: Any,
    ) -> Run:
        """Record a status change (once), tell it in the thread, edit the card; returns the fresh run.

        The event is committed before the post and marked after it, so a crash in between leaves an
        unposted event that the watcher's next tick tells: no transition is lost.
        """
        with self.sessions() as s:
            fresh = self._reload(s, run)
            if fields:
                repos.update_run(s, fresh, **fields)
            event = repos.record_status(s, fresh, status=status, message=message, at=at)
            event_id = event.id if event is not None else None
        if event_id is None:
            return fresh
        self.tell_transition(fresh, event_id=event_id, status=status, text=text, blocks=blocks)
        self.update_card(fresh, force=True)
        return fresh

    def tell_transition(
        self,
        run: Run,
        *,
        event_id: int,
        status: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        recovering: bool = False,
    ) -> bool:
        """Post a recorded status event in the run's thread and note the post; True when posted now.

        `recovering`: an earlier process may have died after the post and before noting it. Slack is then
        the only witness: the post carries the event's id in its message metadata, so the thread is read
        back first and the event is noted as told instead of being posted twice.
        """
        ts = self.find_thread_post(run, TRANSITION_EVENT, event_id=event_id) if recovering else None
        posted = ts is None
        if ts is None:
            ts = self.post_thread(
                run, text, purpose="transition", blocks=blocks, metadata=transition_metadata(event_id, status)
            )
        with self.sessions() as s:
            repos.mark_status_event_posted(s, event_id=event_id, ts=ts)
            if not posted and repos.get_posted_message(s, channel=run.channel, ts=ts) is None:
                repos.record_posted_message(
                    s, channel=run.channel, ts=ts, purpose="transition", run_id=run.id, thread_ts=run.thread_ts
                )
        return posted

    def find_thread_post(self, run: Run, event_type: str, **payload: Any) -> str | None:
        """The ts of a post in the run's thread whose message metadata is `event_type` with `payload`, or None.

        None too when the thread can't be read (e.g. without the channels:history scope): the caller then
        posts, at least once rather than never.
        """
        thread_ts = run.thread_ts or run.card_ts
        if not thread_ts:
            return None
        cursor: str | None = None
        while True:
            try:
                resp = self.client.conversations_replies(
                    channel=run.channel, ts=thread_ts, include_all_metadata=True, limit=200, cursor=cursor
                )
            except SlackApiError as exc:
                log.warning(
                    "can't read the thread of %s back (%s; channels:history is needed): posting, which may repeat",
                    run.name,
                    exc.response.get("error"),
                )
                return None
            for message in resp.get("messages") or []:
                meta = message.get("metadata") or {}
                found = meta.get("event_payload") or {}
                if meta.get("event_type") == event_type and all(found.get(k) == v for k, v in payload.items()):
                    return str(message["ts"])
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return None

    def upload_to_thread(self, run: Run, *, content: bytes, filename: str, title: str, comment: str) -> None:
        """Attach a file in the run's thread (files_upload_v2)."""
        self.client.files_upload_v2(
            channel=run.channel,
            thread_ts=run.thread_ts or run.card_ts,
            content=content,
            filename=filename,
            title=title,
            initial_comment=comment,
        )

    def _reload(self, s: Any, run: Run) -> Run:
        fresh = repos.get_run(s, run_id=run.id or 0)
        if fresh is None:
            raise RunError(f"run {run.name} disappeared from the database")
        return fresh

    # --- lookups ----------------------------------------------------------------------------------

    def find(self, ref: str) -> Run:
        """The run a user means by a uuid, its first 8 characters, or a name; RunError with close names."""
        with self.sessions() as s:
            matches = list(repos.find_runs(s, ref=ref))
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                listed = ", ".join(f"`{r.name}`" for r in matches[:5])
                raise RunError(f"{ref!r} matches several runs ({listed}); use the full run name or uuid")
            names = [r.name for r in repos.list_recent_runs(s, limit=200)]
        close = difflib.get_close_matches(ref, names, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `/finetune status` lists your active runs"
        raise RunError(f"no run {ref!r}{hint}", suggestions=close)

    # --- status / logs / stop ---------------------------------------------------------------------

    def status(self, ref: str | None, *, user: str) -> Reply:
        """One run's card content, or the caller's active runs."""
        if ref is not None:
            run = self.find(ref)
            view = self.card_view(run)
            link = self.permalink(run.channel, run.card_ts)
            blocks = render_card(view)[:-1]  # the buttons live on the card itself
            if link:
                blocks.append(context(f"<{link}|the run's card and thread>"))
            return Reply(text=card_text(view), blocks=blocks)
        with self.sessions() as s:
            active = list(repos.list_active_runs(s, requester=user))
        if not active:
            return Reply(text="You have no active runs.")
        lines = []
        for run in active[:30]:
            step = f" · step {run.last_step}" if run.last_step is not None else ""
            lines.append(f"• `{run.name}` ({run.recipe_name}) *{run.status}*{step}")
        more = f"\n…and {len(active) - 30} more" if len(active) > 30 else ""
        return Reply(
            text=f"{len(active)} active runs", blocks=[header("Your active runs"), section("\n".join(lines) + more)]
        )

    def logs(self, ref: str, *, lines: int, user: str) -> Reply:
        """Post the run's last log lines in its thread (a file when long); redacted."""
        run = self.find(ref)
        if not run.polyaxon_uuid:
            raise RunError(f"run {run.name} has not reached Polyaxon yet ({run.status}); no logs")
        tail = self.gateway.tail_logs(run.polyaxon_uuid, lines=lines)
        text = [redact(line.value, extra_secrets=self.secrets) for line in tail.lines]
        if not text:
            self.post_thread(run, f"No log lines yet for `{run.name}` (asked by <@{user}>).", purpose="logs")
            return Reply(text="No log lines yet; said so in the run's thread.")
        inline, left = cap_tail(text, max_bytes=INLINE_LOG_BYTES)
        body = f"Last {len(text) - left} of {len(text)} log lines of `{run.name}` (asked by <@{user}>):\n```{inline}```"
        self.post_thread(run, body, purpose="logs")
        if left:
            self.upload_to_thread(
                run,
                content="\n".join(text).encode(),
                filename=f"{run.name}-logs.txt",
                title=f"{run.name} logs",
                comment=f"All {len(text)} lines",
            )
        return Reply(text=f"Posted the last {len(text)} log lines in the run's thread.")

    def stop(self, ref: str, *, user: str) -> Reply:
        """Stop a run: only its requester or an approver may."""
        run = self.find(ref)
        if user != run.requester and user not in self.approvers():
            raise RunError(f"only <@{run.requester}> (who started it) or an approver can stop `{run.name}`")
        if run.status in TERMINAL:
            raise RunError(f"run `{run.name}` has already {run.status}")
        if run.polyaxon_uuid is None:
            self.transition(
                run,
                status="stopped",
                message=f"cancelled by {user} before submission",
                text=f":octagonal_sign: Cancelled by <@{user}> before it reached Polyaxon.",
                pending_operation=None,
            )
            return Reply(text=f"Cancelled `{run.name}`.")
        self.gateway.stop(run.polyaxon_uuid)
        with self.sessions() as s:
            repos.add_audit(s, user=user, channel=run.channel, command=f"stop {run.name}", outcome="ok", run_id=run.id)
        self.post_thread(run, f":octagonal_sign: Stop requested by <@{user}>.", purpose="stop")
        return Reply(text=f"Stopping `{run.name}`; the card will say when it has stopped.")

    # --- resume -----------------------------------------------------------------------------------

    def resume(self, cmd: ResumeCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """A new run that loads the parent's checkpoint; refused with a diff when the recipe moved on."""
        parent = self.find(cmd.run)
        if not self.may_run(user):
            raise RunError(f"<@{user}> may not start runs here; ask someone in FINETUNE_RUNNERS")
        if parent.polyaxon_uuid is None or parent.status not in TERMINAL:
            raise RunError(f"run `{parent.name}` is {parent.status}; resume a run that has finished, failed or stopped")
        plan = self.plan(RunCommand(recipe=parent.recipe_name, presets=parent.presets, overrides=parent.overrides))
        diff = resume_diff(parent, plan)
        if diff:
            raise RunError(
                f"can't resume `{parent.name}`: its checkpoint does not fit what the recipe gives now:\n"
                + "\n".join(f"• {line}" for line in diff)
            )
        # Polyaxon's copy starts the new run with the parent's artifacts copied into its own folder, so
        # the trainer finds the parent's checkpoints under its own outputs (any artifacts store, no paths).
        checkpoint = "latest" if cmd.checkpoint == "latest" else f"checkpoint-{cmd.checkpoint.removeprefix('step-')}"
        name = run_name_for(parent.recipe_name, delivery_key)
        with self.sessions() as s:
            if repos.get_run_by_name(s, name=name) is not None:
                return Reply(text=f"Run `{name}` is already submitted.")
            child = repos.create_run(
                s,
                name=name,
                recipe_name=parent.recipe_name,
                recipe_hash=plan.recipe_hash,
                component=parent.component,
                params={**parent.params, "resume_from": checkpoint},
                overrides=parent.overrides,
                presets=parent.presets,
                pins=parent.pins,
                comparable=parent.comparable,
                eval_contract=parent.eval_contract,
                eval_contract_hash=parent.eval_contract_hash,
                requester=user,
                channel=channel,
                status="submitting",
                parent_run_id=parent.id,
            )
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"resume {parent.name} {cmd.checkpoint}",
                outcome="ok",
                run_id=child.id,
            )
        self.post_card(child)
        from bot.polyaxon import GatewayError

        try:
            info = self.gateway.copy_run(
                parent.polyaxon_uuid,
                name=name,
                params={"resume_from": checkpoint},
                tags=plan.tags,
                description=f"resume of {parent.name} by {user}",
            )
        except GatewayError as exc:
            reason = escape(redact(str(exc), extra_secrets=self.secrets))
            self.transition(
                child,
                status="submit_failed",
                message=str(exc)[:500],
                text=f":x: Polyaxon refused the resume: {reason}\nTry `/finetune resume {parent.name}` again.",
            )
            return Reply(text="Polyaxon refused the resume; see the card's thread.")
        child = self.transition(
            child,
            status=info.status or "created",
            message=f"copy of {parent.polyaxon_uuid}",
            text=f"Loads `{checkpoint}` of `{parent.name}` (Polyaxon `{info.uuid}`).",
            polyaxon_uuid=info.uuid,
        )
        child_link = self.permalink(child.channel, child.card_ts)
        self.post_thread(
            parent,
            f":leftwards_arrow_with_hook: Resumed by <@{user}> from {checkpoint} as "
            f"{f'<{child_link}|{child.name}>' if child_link else child.name}.",
            purpose="resume",
        )
        return Reply(text=f"Resuming `{parent.name}` as `{name}`.")

    # --- compare ----------------------------------------------------------------------------------

    def compare(self, cmd: CompareCommand, *, user: str) -> Reply:
        """Table + plot in the first run's thread; refused across eval contracts unless --exploratory."""
        runs = [self.find(ref) for ref in cmd.runs]
        if len(runs) == 1:
            runs += self._peers(runs[0])
        differing = contract_differences(runs)
        if differing and not cmd.exploratory:
            raise RunError(
                "these runs were evaluated differently, so their numbers are not comparable: "
                + "; ".join(differing)
                + ". Add `--exploratory` to see them anyway (watermarked)."
            )
        metric, higher = primary_metric(runs[0].eval_contract or {})
        metric = cmd.metric or metric
        rows: list[tuple[Run, dict[str, float]]] = []
        for run in runs:
            values = self.gateway.last_metrics(run.polyaxon_uuid) if run.polyaxon_uuid else {}
            rows.append((run, values))
        ranked = [r for r in rows if metric in r[1]]
        best = (max if higher else min)(ranked, key=lambda r: r[1][metric])[0].name if ranked else None
        columns = [metric] + [m for m in ("eval_perplexity", "loss", "train_runtime") if m != metric]
        lines = []
        for run, values in rows:
            cells = " · ".join(f"{c} `{values[c]:.4g}`" if c in values else f"{c} —" for c in columns)
            mark = " :trophy:" if run.name == best else ""
            lines.append(f"• `{run.name}`{mark} ({run.status}) {cells}")
        watermark = (
            ":test_tube: *EXPLORATORY — eval contracts differ: " + "; ".join(differing) + "*" if differing else ""
        )
        note = (
            f"Ranked by *{metric}* ({'higher' if higher else 'lower'} is better), the recipe's eval metric; "
            "training loss or speed alone is not ranked."
        )
        blocks = [header(f"Compare {len(runs)} runs by {metric}")]
        if watermark:
            blocks.append(section(watermark))
        blocks += [section("\n".join(lines)), context(note)]
        first = runs[0]
        self.post_thread(
            first, f"Comparison of {len(runs)} runs (asked by <@{user}>)", purpose="compare", blocks=blocks
        )
        png = self._plot(rows, [metric, "loss"], exploratory=bool(differing))
        if png is not None:
            self.upload_to_thread(
                first,
                content=png,
                filename="compare.png",
                title=f"{metric} by step",
                comment=("EXPLORATORY — " if differing else "") + f"{metric} and loss by step",
            )
        return Reply(text=f"Posted the comparison in the thread of `{first.name}`.")

    def _peers(self, run: Run, limit: int = 4) -> list[Run]:
        """The newest finished runs of the same recipe on the same eval contract (what one run is compared with)."""
        with self.sessions() as s:
            recent = repos.list_recent_runs(s, limit=200)
        peers = [
            r
            for r in recent
            if r.id != run.id
            and r.recipe_name == run.recipe_name
            and r.eval_contract_hash == run.eval_contract_hash
            and r.status in {"succeeded", "stopped"}
        ][:limit]
        if not peers:
            raise RunError(
                f"no other finished run of {run.recipe_name} on the same eval contract to compare "
                f"`{run.name}` with; name the runs: `/finetune compare {run.name} RUN…`"
            )
        return peers

    def _plot(self, rows: list[tuple[Run, dict[str, float]]], metrics: list[str], *, exploratory: bool) -> bytes | None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5))
        plotted = False
        for ax, metric in zip(axes if len(metrics) > 1 else [axes], metrics, strict=True):
            for run, _ in rows:
                if not run.polyaxon_uuid:
                    continue
                history = self.gateway.metric_history(run.polyaxon_uuid, [metric], max_points=200).get(metric, [])
                points = [(p.step, p.value) for p in history if p.step is not None]
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=run.name)
                    plotted = True
            ax.set_title(metric)
            ax.set_xlabel("step")
            ax.legend(fontsize="small")
        if exploratory:
            fig.suptitle("EXPLORATORY — different eval contracts", color="red")
        buffer = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
        return buffer.getvalue() if plotted else None


CONTRACT_FIELDS = ("dataset", "revision", "split", "max_samples", "metrics", "procedure_version", "seed")


def contract_differences(runs: Sequence[Run]) -> list[str]:
    """Eval-contract fields that differ between the runs, as `field: a vs b`."""
    first = runs[0].eval_contract or {}
    out: list[str] = []
    for field in CONTRACT_FIELDS:
        values = [str((r.eval_contract or {}).get(field)) for r in runs]
        if len(set(values)) > 1:
            out.append(f"{field}: " + " vs ".join(dict.fromkeys(values)))
    if not out and len({r.eval_contract_hash for r in runs}) > 1 and first:
        out.append("eval contract hash: " + " vs ".join(dict.fromkeys(r.eval_contract_hash[:12] for r in runs)))
    return out


def resume_diff(parent: Run, plan: Plan) -> list[str]:
    """Field-by-field reasons the parent's checkpoint does not fit the recipe as it compiles now."""
    diff: list[str] = []
    for key in sorted(set(parent.pins) | set(plan.pins)):
        old, new = parent.pins.get(key), plan.pins.get(key)
        if old != new:
            diff.append(f"pin `{key}`: `{old}` (parent) vs `{new}` (now)")
    for key in ("model_name_or_path", "model_revision", "max_length", "use_peft", "lora_r", "dtype"):
        old, new = parent.params.get(key), plan.params.get(key)
        if old != new:
            diff.append(f"`{key}`: `{old}` (parent) vs `{new}` (now)")
    if parent.recipe_hash != plan.recipe_hash and not diff:
        return []  # the recipe file changed elsewhere (docs, bounds); the copy reuses the parent's own spec
    return diff
