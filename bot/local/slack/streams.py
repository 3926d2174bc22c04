"""The `chat.*Stream` family: startStream, appendStream, stopStream (a message that grows while it streams).

Rules, from Slack's method pages (docs.slack.dev/reference/methods/chat.startStream, chat.appendStream,
chat.stopStream) and what bots that stream against the live API report where the pages are silent:
- `markdown_text` holds at most 12,000 characters, and so does each `markdown_text` chunk (`msg_too_long`: the
  limit is per call, not per message);
- a stream outside a direct message needs `recipient_team_id` and `recipient_user_id`
  (`missing_recipient_team_id`, `missing_recipient_user_id`);
- only the app that started a stream appends to or stops it (`message_not_owned_by_app`);
- a stopped stream, a message that never streamed, and a stream older than Slack's lifetime (about five
  minutes after its start, reported by bots measuring the live API) answer `message_not_in_streaming_state`;
- appendStream is Tier 4 (100+ per minute); the stand-in's injected rate limits (`SlackStandIn.rate_limit`)
  apply to these methods as to every other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bot.local.slack.limits import block_errors
from bot.local.slack.state import BOT_USER_ID, ApiError, ApiMethod, Channel, Workspace, maybe_json

MAX_MARKDOWN_CHARS = 12_000
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})


@dataclass
class Stream:
    """One streamed message: where it is, whether it still streams, and since when (`time.monotonic()`)."""

    channel: str
    ts: str
    started: float
    state: str = "streaming"  # then "stopped"


def _text_of_call(args: dict[str, Any]) -> str:
    """What a call appends: `markdown_text`, then the text of its `markdown_text` chunks; Slack's errors otherwise."""
    parts: list[str] = []
    text = args.get("markdown_text")
    if text is not None:
        if not isinstance(text, str):
            raise ApiError("invalid_arguments")
        parts.append(text)
    chunks = maybe_json(args.get("chunks"))
    if chunks is not None:
        if not isinstance(chunks, list):
            raise ApiError("invalid_chunks")
        for chunk in chunks:
            if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
                raise ApiError("invalid_chunks")
            if chunk["type"] == "markdown_text":
                if not isinstance(chunk.get("text"), str):
                    raise ApiError("invalid_chunks")
                parts.append(chunk["text"])
    if any(len(part) > MAX_MARKDOWN_CHARS for part in parts):
        raise ApiError("msg_too_long")
    return "".join(parts)


def _streaming(ws: Workspace, args: dict[str, Any]) -> tuple[Channel, dict[str, Any], Stream]:
    """The channel, message and stream an append or stop names, or the error Slack answers."""
    if not args.get("channel") or not args.get("ts"):
        raise ApiError("invalid_arguments")
    ch = ws.channel(args.get("channel"))
    msg = ch.find(args.get("ts"))
    if msg.get("user") != BOT_USER_ID:
        raise ApiError("message_not_owned_by_app")
    stream = ws.streams.get((ch.id, msg["ts"]))
    if stream is None or stream.state != "streaming":
        raise ApiError("message_not_in_streaming_state")
    if time.monotonic() - stream.started > ws.stream_lifetime_s:
        stream.state = "stopped"  # Slack ends it on its own; the message keeps what it had
        raise ApiError("message_not_in_streaming_state")
    return ch, msg, stream


def start_stream(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.startStream: a new message (a reply when `thread_ts` is given) that streams until stopped."""
    ch = ws.channel(args.get("channel"))
    if BOT_USER_ID not in ch.members:
        raise ApiError("not_in_channel")
    if not ch.id.startswith("D"):
        if not args.get("recipient_team_id"):
            raise ApiError("missing_recipient_team_id")
        if not args.get("recipient_user_id"):
            raise ApiError("missing_recipient_user_id")
    if args.get("recipient_user_id"):
        ws.user(args.get("recipient_user_id"))
    text = _text_of_call(args)
    msg = ws.post(ch, user=BOT_USER_ID, text=text, blocks=None, thread_ts=args.get("thread_ts"))
    ws.streams[(ch.id, msg["ts"])] = Stream(ch.id, msg["ts"], started=time.monotonic())
    return {"channel": ch.id, "ts": msg["ts"]}


def append_stream(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.appendStream: more markdown at the end of a streaming message."""
    ch, msg, _ = _streaming(ws, args)
    text = _text_of_call(args)
    if not text and args.get("chunks") is None:
        raise ApiError("invalid_arguments")
    msg["text"] = msg.get("text", "") + text
    return {"channel": ch.id, "ts": msg["ts"]}


def stop_stream(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """chat.stopStream: the last markdown (optional), blocks at the bottom, metadata; the message stops streaming."""
    ch, msg, stream = _streaming(ws, args)
    text = _text_of_call(args)
    blocks = maybe_json(args.get("blocks"))
    if blocks is not None:
        errors = block_errors(blocks)
        if errors:
            raise ApiError("invalid_blocks", errors=errors, response_metadata={"messages": errors})
        msg["blocks"] = blocks
    metadata = maybe_json(args.get("metadata"))
    if metadata is not None:
        msg["metadata"] = metadata
    msg["text"] = msg.get("text", "") + text
    stream.state = "stopped"
    return {"channel": ch.id, "ts": msg["ts"], "message": dict(msg)}


METHODS: dict[str, ApiMethod] = {
    "chat.startStream": start_stream,
    "chat.appendStream": append_stream,
    "chat.stopStream": stop_stream,
}
