"""A local, stateful stand-in for the Slack Web API, reached by the unmodified `slack_sdk.WebClient`.

It speaks Slack's wire format (HTTP 200 with `{"ok": false, "error": ...}` for API errors, 429 with
`Retry-After` when rate limited), keeps channels, users, user groups, messages, threads, reactions,
ephemerals, files and `response_url` posts in memory, and serves a Socket Mode websocket endpoint.
"""

from __future__ import annotations

import copy
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bot.local.slack.limits import message_error
from bot.local.slack.socket_mode import SocketModeEndpoint

TEAM_ID = "T0LOCAL01"
TEAM_DOMAIN = "standin"
BOT_USER_ID = "U0BOT0001"
BOT_ID = "B0BOT0001"
APP_ID = "A0LOCAL01"
DEFAULT_CHANNEL = "C0TRAIN01"


class ApiError(Exception):
    """A Slack Web API error: answered as HTTP 200 with ok=false."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class _Channel:
    id: str
    name: str
    members: set[str]
    is_private: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)  # every message, top level and replies


@dataclass
class _RateLimit:
    remaining: int
    retry_after: int


@dataclass
class _ResponseUrl:
    id: str
    channel: str | None
    user: str | None


_ApiMethod = Callable[[dict[str, Any], str], dict[str, Any]]


class SlackStandIn:
    """In-memory Slack workspace with a Web API on 127.0.0.1 (free port) and a Socket Mode endpoint."""

    def __init__(self, *, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.bot_token = "xoxb-standin-" + secrets.token_hex(12)
        self.app_token = "xapp-1-standin-" + secrets.token_hex(12)
        self.team_id = TEAM_ID
        self.bot_user_id = BOT_USER_ID
        self._lock = threading.RLock()
        self._users: dict[str, dict[str, Any]] = {}
        self._channels: dict[str, _Channel] = {}
        self._usergroups: dict[str, dict[str, Any]] = {}
        self._ephemerals: list[dict[str, Any]] = []
        self._files: dict[str, dict[str, Any]] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._response_url_posts: list[dict[str, Any]] = []
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._rate_limits: dict[str, _RateLimit] = {}
        self._last_ts = 0.0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.socket_mode = SocketModeEndpoint()
        self._methods: dict[str, _ApiMethod] = {
            "api.test": lambda args, _t: {"args": {k: v for k, v in args.items() if k != "token"}},
            "auth.test": self._auth_test,
            "apps.connections.open": self._apps_connections_open,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "reactions.get": self._reactions_get,
            "conversations.history": self._conversations_history,
            "conversations.replies": self._conversations_replies,
            "conversations.info": self._conversations_info,
            "users.info": self._users_info,
            "usergroups.users.list": self._usergroups_users_list,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
        }
        self._seed()

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> SlackStandIn:
        """Bind 127.0.0.1 on a free port and serve in background threads."""
        handler = type("_BoundHandler", (_Handler,), {"standin": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        httpd = self._httpd
        self._thread = threading.Thread(
            target=lambda: httpd.serve_forever(poll_interval=0.05), name="slack-standin", daemon=True
        )
        self._thread.start()
        self.socket_mode.start()
        return self

    def stop(self) -> None:
        """Stop both servers and close open connections."""
        self.socket_mode.stop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SlackStandIn:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        """http://127.0.0.1:PORT (no trailing slash)."""
        if self._httpd is None:
            raise RuntimeError("the stand-in is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

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

    def add_user(
        self, user_id: str, name: str, *, real_name: str | None = None, is_bot: bool = False, tz: str = "UTC"
    ) -> dict[str, Any]:
        """Create (or replace) a workspace member."""
        user = {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "real_name": real_name or name.title(),
            "deleted": False,
            "is_bot": is_bot,
            "is_admin": False,
            "tz": tz,
            "profile": {"real_name": real_name or name.title(), "display_name": name},
        }
        with self._lock:
            self._users[user_id] = user
        return copy.deepcopy(user)

    def add_channel(
        self, channel_id: str, name: str, *, members: list[str] | None = None, is_private: bool = False
    ) -> None:
        """Create a channel; the bot is a member only when listed."""
        with self._lock:
            self._channels[channel_id] = _Channel(channel_id, name, set(members or []), is_private)

    def add_usergroup(self, group_id: str, handle: str, *, users: list[str]) -> None:
        """Create (or replace) a user group (`S…`)."""
        with self._lock:
            self._usergroups[group_id] = {"id": group_id, "handle": handle, "users": list(users)}

    def post_as_user(self, user: str, channel: str, text: str, *, thread_ts: str | None = None) -> str:
        """A human posts a message (no event is sent); returns its ts."""
        with self._lock:
            msg = self._post(self._channel(channel), user=user, text=text, blocks=None, thread_ts=thread_ts)
        return str(msg["ts"])

    def react_as_user(self, user: str, channel: str, ts: str, name: str) -> None:
        """A human adds a reaction (state only; send the `reaction_added` event with SlackSender)."""
        with self._lock:
            self._add_reaction(self._channel(channel), ts, name, user)

    def unreact_as_user(self, user: str, channel: str, ts: str, name: str) -> None:
        """A human removes a reaction (state only)."""
        with self._lock:
            self._remove_reaction(self._channel(channel), ts, name, user)

    def new_response_url(self, *, channel: str | None = None, user: str | None = None) -> str:
        """Mint a `response_url` whose posts this stand-in records."""
        rid = secrets.token_hex(8)
        with self._lock:
            self._response_urls[rid] = _ResponseUrl(rid, channel, user)
        return f"{self.root_url}/hooks/response/{TEAM_ID}/{rid}"

    # --- fault injection ------------------------------------------------------------------------

    def rate_limit(self, method: str, count: int, retry_after: int = 1) -> None:
        """Answer the next `count` calls of `method` ("*" for every method) with 429 and `Retry-After`."""
        with self._lock:
            self._rate_limits[method] = _RateLimit(count, retry_after)

    def reset_faults(self) -> None:
        """No latency, no rate limits."""
        with self._lock:
            self.latency_s = 0.0
            self._rate_limits.clear()

    def _take_rate_limit(self, method: str) -> int | None:
        with self._lock:
            for key in (method, "*"):
                limit = self._rate_limits.get(key)
                if limit is not None and limit.remaining > 0:
                    limit.remaining -= 1
                    return limit.retry_after
        return None

    # --- accessors for tests ----------------------------------------------------------------------

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """Top-level messages of a channel (thread replies sent to the channel too), oldest first."""
        with self._lock:
            return [
                copy.deepcopy(m)
                for m in self._channel(channel).messages
                if _is_top_level(m) or m.get("subtype") == "thread_broadcast"
            ]

    def replies(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """The replies in a thread (without the parent), oldest first."""
        with self._lock:
            return [
                copy.deepcopy(m) for m in self._channel(channel).messages if m.get("thread_ts") == ts and m["ts"] != ts
            ]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        """One message by ts."""
        with self._lock:
            return copy.deepcopy(self._find(self._channel(channel), ts))

    def ephemerals(self, channel: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        """Ephemeral messages posted with chat.postEphemeral, filtered by channel and user."""
        with self._lock:
            return [
                copy.deepcopy(e)
                for e in self._ephemerals
                if (channel is None or e["channel"] == channel) and (user is None or e["user"] == user)
            ]

    def reactions(self, channel: str, ts: str) -> dict[str, list[str]]:
        """Reaction name -> users, on one message."""
        with self._lock:
            msg = self._find(self._channel(channel), ts)
            return {r["name"]: list(r["users"]) for r in msg.get("reactions", [])}

    def files(self) -> list[dict[str, Any]]:
        """Uploaded files (with `content` bytes), in upload order."""
        with self._lock:
            return [copy.deepcopy(f) for f in self._files.values()]

    def response_url_posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Bodies posted to minted response_urls: {"url_id", "channel", "user", "payload"}."""
        with self._lock:
            return [copy.deepcopy(p) for p in self._response_url_posts if channel is None or p["channel"] == channel]

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """Arguments of every Web API call received (tokens removed), optionally of one method."""
        with self._lock:
            return [copy.deepcopy(a) for m, a in self._calls if method is None or m == method]

    # --- request handling -------------------------------------------------------------------------

    def handle_api(self, method: str, args: dict[str, Any], token: str | None) -> tuple[int, dict[str, str], bytes]:
        """Answer one Web API call: (HTTP status, headers, JSON body)."""
        retry_after = self._take_rate_limit(method)
        if retry_after is not None:
            return 429, {"Retry-After": str(retry_after)}, _dumps({"ok": False, "error": "ratelimited"})
        with self._lock:
            self._calls.append((method, {k: v for k, v in args.items() if k != "token"}))
        try:
            func = self._methods.get(method)
            if func is None:
                raise ApiError("unknown_method")
            self._check_token(method, token)
            with self._lock:
                body = {"ok": True, **func(args, token or "")}
        except ApiError as err:
            body = {"ok": False, "error": err.error, **err.extra}
        return 200, {}, _dumps(body)

    def handle_upload(self, file_id: str, data: bytes) -> tuple[int, bytes]:
        """The upload URL from files.getUploadURLExternal: store the bytes."""
        with self._lock:
            entry = self._files.get(file_id)
            if entry is None or entry["uploaded"]:
                return 404, b"file_not_found"
            entry["content"] = data
            entry["size"] = len(data)
            entry["uploaded"] = True
        return 200, f"OK - {len(data)}".encode()

    def handle_response_url(self, rid: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        """A post to a minted response_url: validate like Slack, record it."""
        with self._lock:
            target = self._response_urls.get(rid)
            if target is None:
                return 404, b"no_active_hooks"
            problem = message_error(
                payload.get("text"), payload.get("blocks"), require_content=not payload.get("delete_original")
            )
            if problem is not None:
                return 400, problem[0].encode()
            self._response_url_posts.append(
                {"url_id": rid, "channel": target.channel, "user": target.user, "payload": copy.deepcopy(payload)}
            )
            if payload.get("response_type") == "in_channel" and target.channel in self._channels:
                self._post(
                    self._channels[target.channel],
                    user=BOT_USER_ID,
                    text=payload.get("text", ""),
                    blocks=payload.get("blocks"),
                    thread_ts=payload.get("thread_ts"),
                )
        return 200, b"ok"

    def _check_token(self, method: str, token: str | None) -> None:
        if not token:
            raise ApiError("not_authed")
        if method == "apps.connections.open":
            if token != self.app_token:
                raise ApiError("invalid_auth")
            return
        if token == self.app_token:
            raise ApiError("not_allowed_token_type")
        if token != self.bot_token:
            raise ApiError("invalid_auth")

    # --- state helpers (call with the lock held) ---------------------------------------------------

    def _channel(self, channel_id: Any) -> _Channel:
        ch = self._channels.get(str(channel_id or ""))
        if ch is None:
            raise ApiError("channel_not_found")
        return ch

    def _user(self, user_id: Any) -> dict[str, Any]:
        user = self._users.get(str(user_id or ""))
        if user is None:
            raise ApiError("user_not_found")
        return user

    @staticmethod
    def _find(ch: _Channel, ts: Any) -> dict[str, Any]:
        for msg in ch.messages:
            if msg["ts"] == ts:
                return msg
        raise ApiError("message_not_found")

    def _next_ts(self) -> str:
        # Real ts values are epoch seconds with microseconds, unique per channel; keep them strictly increasing.
        now = max(time.time(), self._last_ts + 0.000001)
        self._last_ts = now
        return f"{now:.6f}"

    def _post(
        self,
        ch: _Channel,
        *,
        user: str,
        text: Any,
        blocks: Any,
        thread_ts: Any,
        files: list[dict[str, Any]] | None = None,
        metadata: Any = None,
    ) -> dict[str, Any]:
        ts = self._next_ts()
        msg: dict[str, Any] = {"type": "message", "ts": ts, "user": user, "text": text or "", "team": self.team_id}
        if user == BOT_USER_ID:
            msg["bot_id"] = BOT_ID
            msg["app_id"] = APP_ID
        if blocks:
            msg["blocks"] = copy.deepcopy(blocks)
        if files:
            msg["files"] = files
        if metadata:
            msg["metadata"] = metadata
        if thread_ts:
            parent = self._find(ch, thread_ts)
            if not _is_top_level(parent):
                parent = self._find(ch, parent["thread_ts"])
            msg["thread_ts"] = parent["ts"]
            msg["parent_user_id"] = parent.get("user")
            parent["thread_ts"] = parent["ts"]
            parent["reply_count"] = parent.get("reply_count", 0) + 1
            users = parent.setdefault("reply_users", [])
            if user not in users:
                users.append(user)
            parent["reply_users_count"] = len(users)
            parent["latest_reply"] = ts
        ch.messages.append(msg)
        return msg

    def _add_reaction(self, ch: _Channel, ts: Any, name: Any, user: str) -> None:
        if not name:
            raise ApiError("invalid_name")
        msg = self._find(ch, ts)
        reactions = msg.setdefault("reactions", [])
        for r in reactions:
            if r["name"] == name:
                if user in r["users"]:
                    raise ApiError("already_reacted")
                r["users"].append(user)
                r["count"] = len(r["users"])
                return
        reactions.append({"name": str(name).strip(":"), "users": [user], "count": 1})

    def _remove_reaction(self, ch: _Channel, ts: Any, name: Any, user: str) -> None:
        msg = self._find(ch, ts)
        for r in msg.get("reactions", []):
            if r["name"] == name and user in r["users"]:
                r["users"].remove(user)
                r["count"] = len(r["users"])
                if not r["users"]:
                    msg["reactions"].remove(r)
                if not msg["reactions"]:
                    del msg["reactions"]
                return
        raise ApiError("no_reaction")

    def _check_message(self, args: dict[str, Any], *, require_content: bool = True) -> tuple[Any, Any]:
        text = args.get("text")
        blocks = _maybe_json(args.get("blocks"))
        problem = message_error(text, blocks, require_content=require_content)
        if problem is not None:
            error, details = problem
            extra = {"errors": details, "response_metadata": {"messages": details}} if details else {}
            raise ApiError(error, **extra)
        return text, blocks

    def _channel_json(self, ch: _Channel) -> dict[str, Any]:
        return {
            "id": ch.id,
            "name": ch.name,
            "is_channel": not ch.is_private,
            "is_group": ch.is_private,
            "is_private": ch.is_private,
            "is_member": BOT_USER_ID in ch.members,
            "is_archived": False,
            "num_members": len(ch.members),
            "context_team_id": self.team_id,
        }

    # --- Web API methods ----------------------------------------------------------------------------

    def _auth_test(self, _args: dict[str, Any], _token: str) -> dict[str, Any]:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.local/",
            "team": "Stand-in",
            "user": "finetune-bot",
            "team_id": self.team_id,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _apps_connections_open(self, _args: dict[str, Any], _token: str) -> dict[str, Any]:
        return {"url": self.socket_mode.new_url()}

    def _chat_post_message(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        if BOT_USER_ID not in ch.members:
            raise ApiError("not_in_channel")
        text, blocks = self._check_message(args)
        msg = self._post(
            ch,
            user=BOT_USER_ID,
            text=text,
            blocks=blocks,
            thread_ts=args.get("thread_ts"),
            metadata=_maybe_json(args.get("metadata")),
        )
        if msg.get("thread_ts") and _flag(args.get("reply_broadcast")):
            # "Also send to channel": one message, in the thread and in the channel's history.
            msg["subtype"] = "thread_broadcast"
        return {"channel": ch.id, "ts": msg["ts"], "message": copy.deepcopy(msg)}

    def _chat_update(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        msg = self._find(ch, args.get("ts"))
        if msg.get("user") != BOT_USER_ID:
            raise ApiError("cant_update_message")
        text, blocks = self._check_message(args, require_content=False)
        if text is not None:
            msg["text"] = text
        if blocks is not None:
            msg["blocks"] = copy.deepcopy(blocks)
        msg["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
        return {"channel": ch.id, "ts": msg["ts"], "text": msg["text"], "message": copy.deepcopy(msg)}

    def _chat_post_ephemeral(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        user = self._user(args.get("user"))
        if BOT_USER_ID not in ch.members:
            raise ApiError("not_in_channel")
        if user["id"] not in ch.members:
            raise ApiError("user_not_in_channel")
        text, blocks = self._check_message(args)
        message_ts = self._next_ts()
        self._ephemerals.append(
            {
                "channel": ch.id,
                "user": user["id"],
                "text": text or "",
                "blocks": copy.deepcopy(blocks),
                "thread_ts": args.get("thread_ts"),
                "message_ts": message_ts,
            }
        )
        return {"message_ts": message_ts}

    def _chat_get_permalink(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        msg = self._find(ch, args.get("message_ts"))
        link = f"https://{TEAM_DOMAIN}.slack.local/archives/{ch.id}/p{msg['ts'].replace('.', '')}"
        if not _is_top_level(msg):
            link += f"?thread_ts={msg['thread_ts']}&cid={ch.id}"
        return {"channel": ch.id, "permalink": link}

    def _reactions_add(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        self._add_reaction(self._channel(args.get("channel")), args.get("timestamp"), args.get("name"), BOT_USER_ID)
        return {}

    def _reactions_remove(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        self._remove_reaction(self._channel(args.get("channel")), args.get("timestamp"), args.get("name"), BOT_USER_ID)
        return {}

    def _reactions_get(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        msg = self._find(ch, args.get("timestamp"))
        return {"type": "message", "channel": ch.id, "message": copy.deepcopy(msg)}

    def _conversations_history(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        limit = int(args.get("limit") or 100)
        top = [m for m in ch.messages if _is_top_level(m)]
        top.reverse()
        return {
            "messages": copy.deepcopy(top[:limit]),
            "has_more": len(top) > limit,
            "response_metadata": {"next_cursor": ""},
        }

    def _conversations_replies(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        ch = self._channel(args.get("channel"))
        try:
            parent = self._find(ch, args.get("ts"))
        except ApiError as err:
            raise ApiError("thread_not_found") from err
        root = parent["ts"] if _is_top_level(parent) else parent["thread_ts"]
        thread = copy.deepcopy([m for m in ch.messages if m["ts"] == root or m.get("thread_ts") == root])
        if not _flag(args.get("include_all_metadata")):
            # Slack returns message metadata only when asked for it.
            for message in thread:
                message.pop("metadata", None)
        return {"messages": thread, "has_more": False, "response_metadata": {"next_cursor": ""}}

    def _conversations_info(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        return {"channel": self._channel_json(self._channel(args.get("channel")))}

    def _users_info(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        return {"user": copy.deepcopy(self._user(args.get("user")))}

    def _usergroups_users_list(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        group = self._usergroups.get(str(args.get("usergroup") or ""))
        if group is None:
            raise ApiError("no_such_subteam")
        return {"users": list(group["users"])}

    def _files_get_upload_url(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        filename = args.get("filename")
        length = args.get("length")
        if not filename or length is None or not str(length).isdigit():
            raise ApiError("invalid_arguments")
        file_id = "F" + secrets.token_hex(5).upper()
        self._files[file_id] = {
            "id": file_id,
            "name": filename,
            "title": filename,
            "length": int(length),
            "size": 0,
            "uploaded": False,
            "completed": False,
            "content": b"",
            "channel": None,
            "thread_ts": None,
        }
        return {"upload_url": f"{self.root_url}/upload/v1/{file_id}", "file_id": file_id}

    def _files_complete_upload(self, args: dict[str, Any], _token: str) -> dict[str, Any]:
        items = _maybe_json(args.get("files"))
        if not isinstance(items, list) or not items:
            raise ApiError("invalid_arguments")
        entries = []
        for item in items:
            entry = self._files.get(str(item.get("id")))
            if entry is None or not entry["uploaded"] or entry["completed"]:
                raise ApiError("file_not_found")
            entries.append((entry, item))
        channel = args.get("channel_id") or (str(args.get("channels") or "").split(",")[0] or None)
        ch = self._channel(channel) if channel else None
        if ch is not None and BOT_USER_ID not in ch.members:
            raise ApiError("not_in_channel")
        shared = []
        for entry, item in entries:
            entry["completed"] = True
            entry["title"] = item.get("title") or entry["name"]
            entry["channel"] = ch.id if ch else None
            entry["thread_ts"] = args.get("thread_ts")
            shared.append({"id": entry["id"], "name": entry["name"], "title": entry["title"], "size": entry["size"]})
        if ch is not None:
            self._post(
                ch,
                user=BOT_USER_ID,
                text=args.get("initial_comment") or "",
                blocks=None,
                thread_ts=args.get("thread_ts"),
                files=shared,
            )
        return {"files": copy.deepcopy(shared)}


def _is_top_level(msg: dict[str, Any]) -> bool:
    return msg.get("thread_ts") in (None, msg["ts"])


def _flag(value: Any) -> bool:
    """A boolean argument as Slack takes it (true/1, JSON or form-encoded)."""
    return str(value).lower() in ("true", "1")


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    """Routes /api/<method>, /upload/v1/<file>, /hooks/response/<team>/<id> to the stand-in."""

    standin: SlackStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr line."""

    def do_GET(self) -> None:
        """GET is accepted for Web API methods, as Slack does."""
        self._dispatch(b"")

    def do_POST(self) -> None:
        """POST with a form, JSON or raw (upload) body."""
        length = int(self.headers.get("Content-Length") or 0)
        self._dispatch(self.rfile.read(length) if length else b"")

    def _dispatch(self, raw: bytes) -> None:
        if self.standin.latency_s > 0:
            time.sleep(self.standin.latency_s)
        parts = urlsplit(self.path)
        path = parts.path
        if path.startswith("/api/"):
            args: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if content_type == "application/json" and raw:
                args.update(json.loads(raw))
            elif raw:
                args.update(parse_qsl(raw.decode(), keep_blank_values=True))
            auth = self.headers.get("Authorization") or ""
            token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else args.get("token")
            status, headers, body = self.standin.handle_api(path.removeprefix("/api/"), args, token)
            self._send(status, body, "application/json; charset=utf-8", headers)
        elif path.startswith("/upload/v1/"):
            status, body = self.standin.handle_upload(path.removeprefix("/upload/v1/"), raw)
            self._send(status, body, "text/plain")
        elif path.startswith("/hooks/response/"):
            rid = path.rstrip("/").rsplit("/", 1)[-1]
            retry_after = self.standin._take_rate_limit("response_url")
            if retry_after is not None:
                self._send(429, b"rate_limited", "text/plain", {"Retry-After": str(retry_after)})
                return
            try:
                payload = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, b"invalid_payload", "text/plain")
                return
            status, body = self.standin.handle_response_url(rid, payload)
            self._send(status, body, "text/plain")
        else:
            self._send(404, b"not found", "text/plain")

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
