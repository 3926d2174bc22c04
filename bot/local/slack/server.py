"""A local, stateful stand-in for the Slack Web API, reached by the unmodified `slack_sdk.WebClient`.

It speaks Slack's wire format (HTTP 200 with `{"ok": false, "error": ...}` for API errors, 429 with
`Retry-After` when rate limited), keeps channels, users, user groups, messages, threads, reactions,
ephemerals, files and `response_url` posts in memory, and serves a Socket Mode websocket endpoint.

Each Web API family answers from its own module (`chat`, `reactions`, `files`, `conversations`,
`users`, `auth`) over the shared `state.Workspace`; a new family (`views.*`) is one more module
whose `METHODS` join the dispatch table below.
"""

from __future__ import annotations

import copy
import json
import secrets
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from bot.local.slack import auth, chat, conversations, functions, responses, streams, users, viewing, views
from bot.local.slack import files as files_api  # aliased: `files()` and `reactions()` are the stand-in's accessors
from bot.local.slack import reactions as reactions_api
from bot.local.slack.httpd import serve, shut_down
from bot.local.slack.socket_mode import SocketModeEndpoint
from bot.local.slack.state import (
    APP_ID,
    BOT_ID,
    BOT_USER_ID,
    DEFAULT_CHANNEL,
    TEAM_DOMAIN,
    TEAM_ID,
    ApiError,
    ApiMethod,
    Channel,
    RateLimit,
    Workspace,
    is_top_level,
)

# The workspace's names stay importable from here, where tests and the local shell have always found them.
__all__ = ["APP_ID", "BOT_ID", "BOT_USER_ID", "DEFAULT_CHANNEL", "TEAM_DOMAIN", "TEAM_ID", "ApiError", "SlackStandIn"]


class SlackStandIn:
    """In-memory Slack workspace with a Web API on 127.0.0.1 (free port) and a Socket Mode endpoint."""

    def __init__(self, *, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.bot_token = "xoxb-standin-" + secrets.token_hex(12)
        self.app_token = "xapp-1-standin-" + secrets.token_hex(12)
        self.bot_user_id = BOT_USER_ID
        self.socket_mode = SocketModeEndpoint()
        self.state = Workspace(self.socket_mode)
        # What a person sees and does in modals and the Home tab (tests and the local shell act through it).
        self.views = viewing.PersonViews(self.state)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._methods: dict[str, ApiMethod] = {
            **auth.METHODS,
            **chat.METHODS,
            **streams.METHODS,
            **reactions_api.METHODS,
            **conversations.METHODS,
            **users.METHODS,
            **files_api.METHODS,
            **views.METHODS,
            **functions.METHODS,
        }
        self._seed()

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> SlackStandIn:
        """Bind 127.0.0.1 on a free port and serve in background threads."""
        self._httpd, self._thread = serve(self)
        self.state.served_at = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self.socket_mode.start()
        return self

    def stop(self) -> None:
        """Stop both servers and close open connections."""
        self.socket_mode.stop()
        if self._httpd is not None and self._thread is not None:
            shut_down(self._httpd, self._thread)
            self._httpd = self._thread = None
            self.state.served_at = None

    def __enter__(self) -> SlackStandIn:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def team_id(self) -> str:
        """The workspace's id (`T…`)."""
        return self.state.team_id

    @property
    def root_url(self) -> str:
        """http://127.0.0.1:PORT (no trailing slash)."""
        return self.state.root_url

    @property
    def base_url(self) -> str:
        """The Web API base for `WebClient(base_url=...)` / `SLACK_API_BASE_URL`, ending in `/api/`."""
        return self.root_url + "/api/"

    # --- seeding ------------------------------------------------------------------------------

    def _seed(self) -> None:
        self.add_user(BOT_USER_ID, "finetune-bot", real_name="finetune-bot", is_bot=True)
        for uid, name in (("U0ALICE01", "alice"), ("U0BOB0001", "bob"), ("U0CAROL01", "carol")):
            self.add_user(uid, name)
        people = ["U0ALICE01", "U0BOB0001", "U0CAROL01"]
        self.add_channel(DEFAULT_CHANNEL, "ml-training", members=[*people, BOT_USER_ID])
        self.add_channel("C0GENERAL", "general", members=people)
        self.add_usergroup("S0APPROVE", "ml-approvers", users=["U0BOB0001", "U0CAROL01"])
        self.state.functions = functions.load_functions()

    def add_user(
        self, user_id: str, name: str, *, real_name: str | None = None, is_bot: bool = False, tz: str = "UTC"
    ) -> dict[str, Any]:
        """Create (or replace) a workspace member."""
        user = users.user_record(self.team_id, user_id, name, real_name=real_name, is_bot=is_bot, tz=tz)
        with self.state.lock:
            self.state.users[user_id] = user
        return copy.deepcopy(user)

    def add_channel(
        self, channel_id: str, name: str, *, members: list[str] | None = None, is_private: bool = False
    ) -> None:
        """Create a channel; the bot is a member only when listed."""
        with self.state.lock:
            self.state.channels[channel_id] = Channel(channel_id, name, set(members or []), is_private)

    def add_usergroup(self, group_id: str, handle: str, *, users: list[str]) -> None:
        """Create (or replace) a user group (`S…`)."""
        with self.state.lock:
            self.state.usergroups[group_id] = {"id": group_id, "handle": handle, "users": list(users)}

    def post_as_user(self, user: str, channel: str, text: str, *, thread_ts: str | None = None) -> str:
        """A human posts a message (no event is sent); returns its ts."""
        with self.state.lock:
            msg = self.state.post(self.state.channel(channel), user=user, text=text, blocks=None, thread_ts=thread_ts)
        return str(msg["ts"])

    def delete_message(self, channel: str, ts: str) -> None:
        """A human deletes a message and its thread (as when a workspace no longer has a bot's old card)."""
        with self.state.lock:
            ch = self.state.channel(channel)
            ch.find(ts)
            ch.messages = [m for m in ch.messages if m["ts"] != ts and m.get("thread_ts") != ts]

    def react_as_user(self, user: str, channel: str, ts: str, name: str) -> None:
        """A human adds a reaction (state only; send the `reaction_added` event with SlackSender)."""
        with self.state.lock:
            reactions_api.add_reaction(self.state.channel(channel), ts, name, user)

    def unreact_as_user(self, user: str, channel: str, ts: str, name: str) -> None:
        """A human removes a reaction (state only)."""
        with self.state.lock:
            reactions_api.remove_reaction(self.state.channel(channel), ts, name, user)

    def new_response_url(self, *, channel: str | None = None, user: str | None = None) -> str:
        """Mint a `response_url` whose posts this stand-in records."""
        return responses.mint(self.state, channel=channel, user=user)

    # --- fault injection ------------------------------------------------------------------------

    def rate_limit(self, method: str, count: int, retry_after: int = 1) -> None:
        """Answer the next `count` calls of `method` ("*" for every method) with 429 and `Retry-After`."""
        with self.state.lock:
            self.state.rate_limits[method] = RateLimit(count, retry_after)

    def reset_faults(self) -> None:
        """No latency, no rate limits."""
        with self.state.lock:
            self.latency_s = 0.0
            self.state.rate_limits.clear()

    # --- accessors for tests ----------------------------------------------------------------------

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """Top-level messages of a channel (thread replies sent to the channel too), oldest first."""
        with self.state.lock:
            return [
                copy.deepcopy(m)
                for m in self.state.channel(channel).messages
                if is_top_level(m) or m.get("subtype") == "thread_broadcast"
            ]

    def replies(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """The replies in a thread (without the parent), oldest first."""
        with self.state.lock:
            return [
                copy.deepcopy(m)
                for m in self.state.channel(channel).messages
                if m.get("thread_ts") == ts and m["ts"] != ts
            ]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        """One message by ts."""
        with self.state.lock:
            return copy.deepcopy(self.state.channel(channel).find(ts))

    def stream_state(self, channel: str, ts: str) -> str | None:
        """A streamed message's state ("streaming" or "stopped"), or None for a message that never streamed."""
        with self.state.lock:
            stream = self.state.streams.get((channel, ts))
            return None if stream is None else str(stream.state)

    def ephemerals(self, channel: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        """Ephemeral messages posted with chat.postEphemeral, filtered by channel and user."""
        with self.state.lock:
            return [
                copy.deepcopy(e)
                for e in self.state.ephemerals
                if (channel is None or e["channel"] == channel) and (user is None or e["user"] == user)
            ]

    def reactions(self, channel: str, ts: str) -> dict[str, list[str]]:
        """Reaction name -> users, on one message."""
        with self.state.lock:
            msg = self.state.channel(channel).find(ts)
            return {r["name"]: list(r["users"]) for r in msg.get("reactions", [])}

    def files(self) -> list[dict[str, Any]]:
        """Uploaded files (with `content` bytes), in upload order."""
        with self.state.lock:
            return [copy.deepcopy(f) for f in self.state.files.values()]

    def response_url_posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Bodies posted to minted response_urls: {"url_id", "channel", "user", "payload"}."""
        with self.state.lock:
            posts = self.state.response_url_posts
            return [copy.deepcopy(p) for p in posts if channel is None or p["channel"] == channel]

    def start_function(self, callback_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """A workflow reached the app's step `callback_id`: its `function_executed` event (send it with the sender)."""
        with self.state.lock:
            return functions.start(self.state, callback_id, inputs)

    def function_execution(self, execution_id: str) -> dict[str, Any]:
        """How an execution stands: {"state": running|completed|failed, "outputs", "error", "completions"}."""
        with self.state.lock:
            execution = self.state.executions[execution_id]
            return {
                "state": execution.state,
                "outputs": copy.deepcopy(execution.outputs),
                "error": execution.error,
                "completions": list(execution.completions),
                "token": execution.token,
            }

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """Arguments of every Web API call received (tokens removed), optionally of one method."""
        with self.state.lock:
            return [copy.deepcopy(a) for m, a in self.state.calls if method is None or m == method]

    # --- request handling -------------------------------------------------------------------------

    def handle_api(self, method: str, args: dict[str, Any], token: str | None) -> tuple[int, dict[str, str], bytes]:
        """Answer one Web API call: (HTTP status, headers, JSON body)."""
        retry_after = self.state.take_rate_limit(method)
        if retry_after is not None:
            return 429, {"Retry-After": str(retry_after)}, _dumps({"ok": False, "error": "ratelimited"})
        with self.state.lock:
            self.state.calls.append((method, {k: v for k, v in args.items() if k != "token"}))
        try:
            func = self._methods.get(method)
            if func is None:
                raise ApiError("unknown_method")
            if token is not None and token.startswith(functions.WORKFLOW_TOKEN_PREFIX):
                with self.state.lock:
                    functions.check_workflow_token(self.state, token)
            else:
                auth.check_token(method, token, bot_token=self.bot_token, app_token=self.app_token)
            with self.state.lock:
                body = {"ok": True, **func(self.state, args)}
        except ApiError as err:
            body = {"ok": False, "error": err.error, **err.extra}
        return 200, {}, _dumps(body)

    def handle_upload(self, file_id: str, data: bytes) -> tuple[int, bytes]:
        """The upload URL from files.getUploadURLExternal: store the bytes."""
        return files_api.upload(self.state, file_id, data)

    def handle_response_url(self, rid: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        """A post to a minted response_url: validate like Slack, record it."""
        return responses.receive(self.state, rid, payload)


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()
