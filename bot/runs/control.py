"""Looking at and stopping runs: `/finetune status`, `logs` and `stop`."""

from __future__ import annotations

from bot.redact import cap_tail, redact
from bot.runs.card import card_text, render_card
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.lookup import find_run
from bot.runs.thread import RunThread
from bot.slack.blocks import context, header, section
from storage import repos

TERMINAL = repos.TERMINAL_STATUSES
INLINE_LOG_BYTES = 3500


class RunControl:
    """One run's card content or the caller's active runs, a run's log tail, and stop."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def status(self, ref: str | None, *, user: str) -> Reply:
        """One run's card content, or the caller's active runs."""
        if ref is not None:
            run = find_run(self.deps.sessions, ref)
            view = self.thread.card_view(run)
            link = self.thread.permalink(run.channel, run.card_ts)
            blocks = render_card(view)[:-1]  # the buttons live on the card itself
            if link:
                blocks.append(context(f"<{link}|the run's card and thread>"))
            return Reply(text=card_text(view), blocks=blocks)
        with self.deps.sessions() as s:
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
        run = find_run(self.deps.sessions, ref)
        if not run.polyaxon_uuid:
            raise RunError(f"run {run.name} has not reached Polyaxon yet ({run.status}); no logs")
        tail = self.deps.gateway.tail_logs(run.polyaxon_uuid, lines=lines)
        text = [redact(line.value, extra_secrets=self.deps.secrets) for line in tail.lines]
        if not text:
            self.thread.post_thread(run, f"No log lines yet for `{run.name}` (asked by <@{user}>).", purpose="logs")
            return Reply(text="No log lines yet; said so in the run's thread.")
        inline, left = cap_tail(text, max_bytes=INLINE_LOG_BYTES)
        body = f"Last {len(text) - left} of {len(text)} log lines of `{run.name}` (asked by <@{user}>):\n```{inline}```"
        self.thread.post_thread(run, body, purpose="logs")
        if left:
            self.thread.upload_to_thread(
                run,
                content="\n".join(text).encode(),
                filename=f"{run.name}-logs.txt",
                title=f"{run.name} logs",
                comment=f"All {len(text)} lines",
            )
        return Reply(text=f"Posted the last {len(text)} log lines in the run's thread.")

    def stop(self, ref: str, *, user: str) -> Reply:
        """Stop a run: only its requester or an approver may."""
        run = find_run(self.deps.sessions, ref)
        if user != run.requester and user not in self.deps.people.approvers():
            raise RunError(f"only <@{run.requester}> (who started it) or an approver can stop `{run.name}`")
        if run.status in TERMINAL:
            raise RunError(f"run `{run.name}` has already {run.status}")
        if run.polyaxon_uuid is None:
            self.thread.transition(
                run,
                status="stopped",
                message=f"cancelled by {user} before submission",
                text=f":octagonal_sign: Cancelled by <@{user}> before it reached Polyaxon.",
                pending_operation=None,
            )
            return Reply(text=f"Cancelled `{run.name}`.")
        self.deps.gateway.stop(run.polyaxon_uuid)
        with self.deps.sessions() as s:
            repos.add_audit(s, user=user, channel=run.channel, command=f"stop {run.name}", outcome="ok", run_id=run.id)
        self.thread.post_thread(run, f":octagonal_sign: Stop requested by <@{user}>.", purpose="stop")
        return Reply(text=f"Stopping `{run.name}`; the card will say when it has stopped.")
