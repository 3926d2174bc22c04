"""A step's one completion: the outcome claimed in the database first, then told to Slack, then marked told.

`functions.completeSuccess` / `functions.completeError` are what Bolt's `complete()` and `fail()` call
(slack_bolt/context/complete/complete.py, fail/fail.py). They are called here, not through Bolt's helpers,
because a step may complete long after its delivery (a promotion waits for approvers), in another process.
The claim (pending -> completing, with the outcome) makes exactly one caller choose the outcome; a process
that dies before Slack has it leaves the row `completing`, and the next pass tells Slack the same outcome.
Slack answers a second completion of one execution `execution_not_in_running_state` (or
`function_execution_not_found` once it is gone): either means Slack has an outcome, and the row is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.background import BackgroundItems
from storage import repos
from storage.db import SessionFactory

log = logging.getLogger(__name__)

# Slack's answers that mean the execution has its outcome already (a retry after a crash, or a second caller).
ALREADY_COMPLETED = frozenset({"execution_not_in_running_state", "function_execution_not_found"})
# A claim younger than this may still be telling Slack in a live process: the retry pass leaves it alone.
RETELL_AFTER = timedelta(seconds=30)
MAX_ERROR_CHARS = 2000
RETELL = "step_completion"  # the background pass that tells Slack what a dead process claimed (bot.background)


class StepCompletions:
    """Completes step executions exactly once (see the module's docstring)."""

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        client: WebClient,
        clock: Callable[[], datetime],
        items: BackgroundItems | None = None,
    ) -> None:
        self.sessions = sessions
        self.client = client
        self.clock = clock
        self.items = items or BackgroundItems(sessions=sessions, clock=clock)

    def succeed(self, execution_id: str, outputs: dict[str, Any], *, token: str | None = None) -> bool:
        """Complete with `outputs` (functions.completeSuccess); False when it had an outcome already."""
        return self._finish(execution_id, outputs=outputs, error=None, token=token)

    def fail(self, execution_id: str, error: str, *, token: str | None = None) -> bool:
        """Complete with a specific error (functions.completeError); False when it had an outcome already."""
        return self._finish(execution_id, outputs=None, error=error[:MAX_ERROR_CHARS], token=token)

    def _finish(
        self, execution_id: str, *, outputs: dict[str, Any] | None, error: str | None, token: str | None
    ) -> bool:
        with self.sessions() as s:
            claimed = repos.claim_step_completion(
                s, function_execution_id=execution_id, outputs=outputs, error=error, now=self.clock()
            )
        if claimed:
            self.tell(execution_id, outputs=outputs, error=error, token=token)
        return claimed

    def tell(self, execution_id: str, *, outputs: dict[str, Any] | None, error: str | None, token: str | None) -> None:
        """Tell Slack the claimed outcome, then mark it told. `token`: the execution's own workflow token while its
        delivery is at hand (what Bolt's helpers use); None later, when the app's bot token completes it."""
        extra: dict[str, Any] = {"token": token} if token else {}
        try:
            if error is not None:
                self.client.functions_completeError(function_execution_id=execution_id, error=error, **extra)
            else:
                self.client.functions_completeSuccess(
                    function_execution_id=execution_id, outputs=outputs or {}, **extra
                )
        except SlackApiError as exc:
            reason = str(exc.response.get("error"))
            if reason not in ALREADY_COMPLETED:
                raise  # left `completing`: the retry pass tells Slack again
            log.info("step %s had its outcome already (%s)", execution_id, reason)
        with self.sessions() as s:
            repos.finish_step_execution(s, function_execution_id=execution_id, now=self.clock())

    def retell(self) -> int:
        """Tell Slack the outcomes claimed by a process that died before telling; how many were told now."""
        with self.sessions() as s:
            stuck = repos.list_step_executions(s, statuses=["completing"], claimed_before=self.clock() - RETELL_AFTER)
        batch = self.items.batch(RETELL, [row.function_execution_id for row in stuck])
        told = 0
        for row in stuck:
            work = partial(self.tell, row.function_execution_id, outputs=row.outputs, error=row.error, token=None)
            told += batch.attempt(row.function_execution_id, work).ok
        return told
