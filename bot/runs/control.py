"""Looking at and stopping runs: `/finetune status`, `logs` and `stop`."""

from __future__ import annotations

from collections.abc import Callable

from bot.redact import cap_tail, redact
from bot.runs.admit import find_run_for
from bot.runs.card import card_text, card_view, progress_summary, render_card
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.kinds import Verb
from bot.runs.thread import RunThread
from bot.slack.blocks import context, escape, header, mention, section
from storage import repos
from storage.models import Run

TERMINAL = repos.TERMINAL_STATUSES
RECENT = 5  # the ended runs `/finetune status` lists beside the active ones
CancelHook = Callable[[Run, str], str | None]
INLINE_LOG_BYTES = 3500


class RunControl:
    """One run's card content or the caller's active runs, a run's log tail, and stop."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread
        # Called with (run, user) when a run is cancelled before it reached Polyaxon; each closes what waited on
        # it and returns the sentence that says so (None: nothing). The registry adds its own (this layer may not
        # import it): a held run's approval request is voided at once, in the same message.
        self.on_cancel: list[CancelHook] = []

    def status(self, ref: str | None, *, user: str) -> Reply:
        """One run's card content, or the caller's active runs."""
        if ref is not None:
            run = find_run_for(self.deps.sessions, ref, Verb.STATUS)
            view = self.thread.card_view(run)
            link = self.thread.permalink(run.channel, run.card_ts)
            blocks = render_card(view)[:-1]  # the buttons live on the card itself
            if link:
                blocks.append(context(f"<{link}|the run's card and thread>"))
            return Reply(text=card_text(view), blocks=blocks)
        with self.deps.sessions() as s:
            active = list(repos.list_active_runs(s, requester=user))
            finished = list(repos.list_finished_runs(s, requester=user, limit=RECENT))
        if not active and not finished:
            return Reply(
                text="You have no runs yet: `/finetune run recipe=NAME` starts one (`/finetune recipes` lists them)."
            )
        blocks = [header("Your runs")]
        if active:
            lines = [self._line(run) for run in active[:30]]
            more = f"\n…and {len(active) - 30} more" if len(active) > 30 else ""
            blocks.append(section(f"*Active* ({len(active)})\n" + "\n".join(lines) + more))
        else:
            blocks.append(section("*Active*: none."))
        if finished:
            lines = [self._line(run) for run in finished]
            blocks.append(section(f"*Recently ended* (your last {len(finished)})\n" + "\n".join(lines)))
        blocks.append(context("`/finetune status RUN` shows one run's card."))
        return Reply(text=f"{len(active)} active runs, {len(finished)} recently ended", blocks=blocks)

    @staticmethod
    def _line(run: Run) -> str:
        """`• `name` (recipe) *status* · step 20/20 · eval_loss 1.538`: what its card shows, without reads."""
        view = card_view(run, polyaxon_url=None)
        return f"• `{escape(run.name)}` ({escape(run.recipe_name)}) *{escape(run.status)}*{progress_summary(view)}"

    def logs(self, ref: str, *, lines: int, user: str) -> Reply:
        """Post the run's last log lines in its thread (a file when long); redacted."""
        run = find_run_for(self.deps.sessions, ref, Verb.LOGS)
        if not run.polyaxon_uuid:
            raise RunError(f"run {escape(run.name)} has not reached Polyaxon yet ({escape(run.status)}); no logs")
        tail = self.deps.gateway.tail_logs(run.polyaxon_uuid, lines=lines)
        text = [redact(line.value, extra_secrets=self.deps.secrets) for line in tail.lines]
        if not text:
            self.thread.post_thread(
                run, f"No log lines yet for `{escape(run.name)}` (asked by {mention(user)}).", purpose="logs"
            )
            return Reply(text="No log lines yet; said so in the run's thread.")
        # A job writes what it likes: its lines are escaped for the message (the attached file keeps them as written).
        inline, left = cap_tail([escape(line) for line in text], max_bytes=INLINE_LOG_BYTES)
        total = max(tail.total or 0, len(text))
        heading = logs_heading(shown=len(text) - left, fetched=len(text), total=total, asked=lines)
        body = f"{heading} of `{escape(run.name)}` (asked by {mention(user)}):\n```{inline}```"
        self.thread.post_thread(run, body, purpose="logs")
        if left:
            self.thread.upload_to_thread(
                run,
                content="\n".join(text).encode(),
                filename=f"{run.name}-logs.txt",
                title=f"{run.name} logs",
                comment=f"The last {len(text)} of the log's {total} lines",
            )
        return Reply(text=f"Posted the last {len(text)} of {total} log lines in the run's thread.")

    def stop(self, ref: str, *, user: str) -> Reply:
        """Stop a run: only its requester or an approver may."""
        run = find_run_for(self.deps.sessions, ref, Verb.STOP)
        if user != run.requester and user not in self.deps.people.approvers():
            raise RunError(
                f"only {mention(run.requester)} (who started it) or an approver can stop `{escape(run.name)}`"
            )
        if run.status in TERMINAL:
            raise RunError(f"run `{escape(run.name)}` has already {escape(run.status)}")
        if run.polyaxon_uuid is None:
            # What waited on the run closes first (an approval request holding it is voided), so that the one
            # cancellation message can say all of it and nothing ended is left waiting for a decision.
            closed = [said for hook in self.on_cancel if (said := hook(run, user))]
            with self.deps.sessions() as s:
                repos.add_audit(
                    s, user=user, channel=run.channel, command=f"stop {run.name}", outcome="ok", run_id=run.id
                )
            self.thread.transition(
                run,
                status="stopped",
                message=f"cancelled by {user} before submission",
                text=" ".join([f":octagonal_sign: Cancelled by {mention(user)} before it reached Polyaxon.", *closed]),
                pending_operation=None,
            )
            return Reply(text=" ".join([f"Cancelled `{escape(run.name)}`.", *closed]))
        self.deps.gateway.stop(run.polyaxon_uuid)
        with self.deps.sessions() as s:
            repos.add_audit(s, user=user, channel=run.channel, command=f"stop {run.name}", outcome="ok", run_id=run.id)
        self.thread.post_thread(run, f":octagonal_sign: Stop requested by {mention(user)}.", purpose="stop")
        return Reply(text=f"Stopping `{escape(run.name)}`; the card will say when it has stopped.")


def logs_heading(*, shown: int, fetched: int, total: int, asked: int) -> str:
    """`Last 15 of 41 log lines`, and why fewer than asked are shown: the log holds no more (blank lines are
    not kept), or the message's size cap left the earlier ones to the attached file."""
    noun = "log line" if total == 1 else "log lines"
    heading = f"All {total} {noun}" if shown == total else f"Last {shown} of {total} {noun}"
    why = []
    if fetched < asked:
        why.append(f"asked for {asked}; the log holds no more, blank lines are not kept")
    if shown < fetched:
        why.append(
            f"the {fetched - shown} before these{'' if fetched == total else f', to {fetched} asked,'} are in the "
            f"attached file: a message holds {INLINE_LOG_BYTES:,} bytes"
        )
    return heading + (f" ({'; '.join(why)})" if why else "")
