"""Slack's side of the HTTP front door: signed slash commands, Events API envelopes and interactivity payloads."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from bot.local.slack import viewing
from bot.local.slack.server import SlackStandIn
from bot.local.slack.state import APP_ID, BOT_USER_ID, DEFAULT_CHANNEL, TEAM_DOMAIN, TEAM_ID

DEFAULT_USER = "U0ALICE01"


@dataclass
class SentRequest:
    """What the bot answered to one delivery."""

    status: int
    body: str
    headers: dict[str, str]
    elapsed_s: float
    payload: dict[str, Any] = field(default_factory=dict)

    def json(self) -> Any:
        """The response body parsed as JSON."""
        return json.loads(self.body)


def sign(signing_secret: str, timestamp: str, body: str) -> str:
    """Slack's v0 request signature for a body sent at `timestamp`."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def new_trigger_id() -> str:
    """A trigger_id shaped like Slack's."""
    return f"{secrets.randbelow(10**11)}.{secrets.randbelow(10**9)}.{secrets.token_hex(16)}"


def new_event_id() -> str:
    """An event_id shaped like Slack's (Ev + 9 to 11 characters)."""
    return "Ev" + secrets.token_hex(5).upper()


def slash_channel_name(channel_id: str) -> str:
    """The `channel_name` Slack sends with a slash command: `directmessage` from any direct message."""
    if channel_id.startswith("D"):
        return "directmessage"
    return "ml-training" if channel_id == DEFAULT_CHANNEL else channel_id.lower()


def slash_command_fields(
    text: str,
    *,
    response_url: str,
    user_id: str = DEFAULT_USER,
    channel_id: str = DEFAULT_CHANNEL,
    command: str = "/finetune",
    trigger_id: str | None = None,
    team_id: str = TEAM_ID,
) -> dict[str, str]:
    """Every form field Slack sends with a slash command."""
    return {
        "token": "standin-verification-token",
        "team_id": team_id,
        "team_domain": TEAM_DOMAIN,
        "channel_id": channel_id,
        "channel_name": slash_channel_name(channel_id),
        "user_id": user_id,
        "user_name": user_id.lower(),
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }


def event_envelope(event: dict[str, Any], *, event_id: str | None = None, team_id: str = TEAM_ID) -> dict[str, Any]:
    """An Events API `event_callback` envelope around `event`."""
    now = time.time()
    event = {"event_ts": f"{now:.6f}", **event}
    return {
        "token": "standin-verification-token",
        "team_id": team_id,
        "context_team_id": team_id,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or new_event_id(),
        "event_time": int(now),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team_id,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


def reaction_event(
    kind: str, *, user: str, channel: str, ts: str, reaction: str, item_user: str = BOT_USER_ID
) -> dict[str, Any]:
    """A `reaction_added` / `reaction_removed` event body."""
    return {
        "type": kind,
        "user": user,
        "reaction": reaction,
        "item_user": item_user,
        "item": {"type": "message", "channel": channel, "ts": ts},
    }


def block_actions_payload(
    action_id: str,
    value: str,
    *,
    response_url: str,
    user_id: str = DEFAULT_USER,
    channel_id: str = DEFAULT_CHANNEL,
    message_ts: str | None = None,
    thread_ts: str | None = None,
    trigger_id: str | None = None,
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """A `block_actions` interactivity payload for one button click."""
    now = f"{time.time():.6f}"
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts or now,
        "channel_id": channel_id,
        "is_ephemeral": False,
    }
    if thread_ts:
        container["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_id.lower(), "name": user_id.lower(), "team_id": team_id},
        "api_app_id": APP_ID,
        "token": "standin-verification-token",
        "container": container,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": {"id": team_id, "domain": TEAM_DOMAIN},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_id.lower()},
        "message": {"type": "message", "ts": message_ts or now, "user": BOT_USER_ID, "text": ""},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": "standin",
                "type": "button",
                "value": value,
                "text": {"type": "plain_text", "text": value[:75]},
                "action_ts": now,
            }
        ],
    }


class SlackSender:
    """Posts signed requests to the bot's `/slack/events`, as Slack does."""

    def __init__(
        self,
        bot_url: str,
        signing_secret: str,
        *,
        standin: SlackStandIn | None = None,
        path: str = "/slack/events",
        timeout_s: float = 30.0,
    ) -> None:
        parts = urlsplit(bot_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path.rstrip("/") + path if parts.path not in ("", "/") else path
        self.signing_secret = signing_secret
        self.standin = standin
        self.timeout_s = timeout_s

    def _trigger(self, user_id: str) -> str:
        """A trigger id the stand-in will honour in views.open/push (once, for 3 s); shaped alike without one."""
        return self.standin.views.mint_trigger(user_id) if self.standin is not None else new_trigger_id()

    def _standin(self) -> SlackStandIn:
        if self.standin is None:
            raise RuntimeError("views need the stand-in: build the sender with standin=")
        return self.standin

    def _response_url(self, channel_id: str, user_id: str) -> str:
        if self.standin is None:
            return "http://127.0.0.1:9/hooks/response/none"
        return self.standin.new_response_url(channel=channel_id, user=user_id)

    def post(
        self,
        body: str,
        content_type: str,
        *,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> SentRequest:
        """Sign (unless `signature` is given) and POST a raw body; `timestamp` defaults to now."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        all_headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": signature if signature is not None else sign(self.signing_secret, ts, body),
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **(headers or {}),
        }
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        start = time.perf_counter()
        try:
            conn.request("POST", self.path, body=body.encode(), headers=all_headers)
            resp = conn.getresponse()
            data = resp.read().decode()
            elapsed = time.perf_counter() - start
            return SentRequest(resp.status, data, {k.lower(): v for k, v in resp.getheaders()}, elapsed)
        finally:
            conn.close()

    def slash_command(
        self,
        text: str,
        *,
        user_id: str = DEFAULT_USER,
        channel_id: str = DEFAULT_CHANNEL,
        command: str = "/finetune",
        trigger_id: str | None = None,
        response_url: str | None = None,
        fields: dict[str, str] | None = None,
        **post_kwargs: Any,
    ) -> SentRequest:
        """Send `/finetune <text>` as a signed form post (pass `fields` to resend an exact payload)."""
        if fields is None:
            fields = slash_command_fields(
                text,
                user_id=user_id,
                channel_id=channel_id,
                command=command,
                trigger_id=trigger_id or self._trigger(user_id),
                response_url=response_url or self._response_url(channel_id, user_id),
            )
        sent = self.post(urlencode(fields), "application/x-www-form-urlencoded", **post_kwargs)
        sent.payload = dict(fields)
        return sent

    def event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str | None = None,
        envelope: dict[str, Any] | None = None,
        **post_kwargs: Any,
    ) -> SentRequest:
        """Send an Events API envelope; a retry carries `X-Slack-Retry-Num`/`-Reason` and the same event_id."""
        envelope = envelope if envelope is not None else event_envelope(event, event_id=event_id)
        headers = dict(post_kwargs.pop("headers", None) or {})
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = retry_reason or "http_timeout"
        sent = self.post(json.dumps(envelope), "application/json", headers=headers, **post_kwargs)
        sent.payload = envelope
        return sent

    def reaction(self, kind: str, *, user: str, channel: str, ts: str, reaction: str, **kwargs: Any) -> SentRequest:
        """Send `reaction_added` or `reaction_removed`."""
        return self.event(reaction_event(kind, user=user, channel=channel, ts=ts, reaction=reaction), **kwargs)

    def interactivity(self, payload: dict[str, Any], **post_kwargs: Any) -> SentRequest:
        """Send an interactivity payload (form field `payload`)."""
        sent = self.post(
            urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded", **post_kwargs
        )
        sent.payload = payload
        return sent

    def button(
        self,
        action_id: str,
        value: str,
        *,
        user_id: str = DEFAULT_USER,
        channel_id: str = DEFAULT_CHANNEL,
        message_ts: str | None = None,
        thread_ts: str | None = None,
        **post_kwargs: Any,
    ) -> SentRequest:
        """Click a button whose value is `value`."""
        payload = block_actions_payload(
            action_id,
            value,
            user_id=user_id,
            channel_id=channel_id,
            message_ts=message_ts,
            thread_ts=thread_ts,
            response_url=self._response_url(channel_id, user_id),
            trigger_id=self._trigger(user_id),
        )
        return self.interactivity(payload, **post_kwargs)

    # --- views: the person acts in a modal or the Home tab, Slack tells the app ---------------------------

    def view_action(self, view_id: str, block_id: str, action_id: str, **post_kwargs: Any) -> SentRequest:
        """A button clicked in a view, or an input with `dispatch_action` changed (after `standin.enter`)."""
        standin = self._standin()
        with standin.state.lock:
            payload = viewing.view_action_payload(standin.state, view_id, block_id, action_id)
        return self.interactivity(payload, **post_kwargs)

    def submit_view(self, view_id: str, **post_kwargs: Any) -> tuple[SentRequest, dict[str, Any]]:
        """Submit an open modal; the app's answer is applied as Slack applies it: (the request, what happened)."""
        standin = self._standin()
        with standin.state.lock:
            payload = viewing.submission_payload(standin.state, view_id)
        sent = self.interactivity(payload, **post_kwargs)
        with standin.state.lock:
            outcome = viewing.answer_submission(standin.state, view_id, sent.status, sent.body)
        return sent, outcome

    def message_shortcut(
        self, callback_id: str, *, channel_id: str, message_ts: str, user_id: str = DEFAULT_USER, **post_kwargs: Any
    ) -> SentRequest:
        """A message shortcut chosen on a message (its `⋮` menu)."""
        standin = self._standin()
        url = self._response_url(channel_id, user_id)
        with standin.state.lock:
            payload = viewing.shortcut_payload(
                standin.state, callback_id, user=user_id, channel=channel_id, message_ts=message_ts, response_url=url
            )
        return self.interactivity(payload, **post_kwargs)

    def function_executed(self, callback_id: str, inputs: dict[str, Any], **post_kwargs: Any) -> SentRequest:
        """A workflow runs the app's step `callback_id` with `inputs` (the execution's id: `sent.payload`'s event)."""
        event = self._standin().start_function(callback_id, inputs)
        return self.event(event, **post_kwargs)

    def home_opened(self, user_id: str = DEFAULT_USER, **post_kwargs: Any) -> SentRequest:
        """The person opens the app's Home tab."""
        standin = self._standin()
        with standin.state.lock:
            event = viewing.home_opened_event(standin.state, user_id)
        return self.event(event, **post_kwargs)
