"""`step CALLBACK KEY=VALUE …` in the local shell: a Workflow Builder step run as Slack runs one, its completion
printed when it comes (a promotion's step completes when approvers decide: printed after a later line)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import Any

from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.state import ApiError

WAIT_S = 30.0  # a run's step completes once the run is submitted; a promotion's waits for approvers


class StepDriver:
    """Sends `function_executed` deliveries and prints how each execution ended."""

    def __init__(self, *, sender: SlackSender, standin: SlackStandIn, say: Callable[[str], None]) -> None:
        self.sender = sender
        self.standin = standin
        self.say = say
        self.waiting: list[tuple[str, str]] = []  # (execution id, callback id) not completed yet

    def run(self, line: str, *, user: str) -> None:
        """`step CALLBACK KEY=VALUE …`: `channel=#name` is looked up, `requester` defaults to you."""
        words = shlex.split(line)[1:]
        if not words:
            raise ValueError(f"which step? {', '.join(self.standin.state.functions) or 'none declared'}")
        callback_id, inputs = words[0], dict(self._pair(w) for w in words[1:])
        inputs.setdefault("requester", user)
        if str(inputs.get("channel", "")).startswith("#"):
            inputs["channel"] = self._channel_id(inputs["channel"][1:])
        try:
            sent = self.sender.function_executed(callback_id, inputs)
        except ApiError as exc:
            raise ValueError(f"no step {callback_id!r} in the app manifest ({exc.error})") from None
        if sent.status != 200:
            self.say(f"the bot answered HTTP {sent.status}: {sent.body[:200]}")
            return
        self.waiting.append((sent.payload["event"]["function_execution_id"], callback_id))
        deadline = time.monotonic() + WAIT_S
        while self.waiting and time.monotonic() < deadline and self.poll() == 0:
            time.sleep(0.2)
        if self.waiting:
            self.say(f"{callback_id} is still running; its completion is printed when it comes")

    def poll(self) -> int:
        """Print the completions that came since; how many."""
        done = 0
        for execution, callback_id in list(self.waiting):
            ended = self.standin.function_execution(execution)
            if ended["state"] == "running":
                continue
            self.waiting.remove((execution, callback_id))
            done += 1
            if ended["state"] == "completed":
                outputs = " ".join(f"{k}={v}" for k, v in (ended["outputs"] or {}).items())
                self.say(f"step {callback_id} completed: {outputs}")
            else:
                self.say(f"step {callback_id} failed: {ended['error']}")
        return done

    @staticmethod
    def _pair(word: str) -> tuple[str, Any]:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ValueError(f"{word!r} is not KEY=VALUE")
        return key, value

    def _channel_id(self, name: str) -> str:
        with self.standin.state.lock:
            found = [c.id for c in self.standin.state.channels.values() if c.name == name]
        if not found:
            raise ValueError(f"no channel #{name} in the workspace")
        return found[0]
