"""The `files.*` family: getUploadURLExternal, the upload URL itself, completeUploadExternal."""

from __future__ import annotations

import copy
import secrets
from typing import Any

from bot.local.slack.state import BOT_USER_ID, ApiError, ApiMethod, Workspace, maybe_json


def get_upload_url(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """files.getUploadURLExternal: reserve a file and hand out where to upload its bytes."""
    filename = args.get("filename")
    length = args.get("length")
    if not filename or length is None or not str(length).isdigit():
        raise ApiError("invalid_arguments")
    file_id = "F" + secrets.token_hex(5).upper()
    ws.files[file_id] = {
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
    return {"upload_url": f"{ws.root_url}/upload/v1/{file_id}", "file_id": file_id}


def upload(ws: Workspace, file_id: str, data: bytes) -> tuple[int, bytes]:
    """A post to the upload URL: store the bytes, once; (HTTP status, plain-text body)."""
    with ws.lock:
        entry = ws.files.get(file_id)
        if entry is None or entry["uploaded"]:
            return 404, b"file_not_found"
        entry["content"] = data
        entry["size"] = len(data)
        entry["uploaded"] = True
    return 200, f"OK - {len(data)}".encode()


def complete_upload(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """files.completeUploadExternal: finish uploaded files and share them in a channel or thread."""
    items = maybe_json(args.get("files"))
    if not isinstance(items, list) or not items:
        raise ApiError("invalid_arguments")
    entries = []
    for item in items:
        entry = ws.files.get(str(item.get("id")))
        if entry is None or not entry["uploaded"] or entry["completed"]:
            raise ApiError("file_not_found")
        entries.append((entry, item))
    channel = args.get("channel_id") or (str(args.get("channels") or "").split(",")[0] or None)
    ch = ws.channel(channel) if channel else None
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
        ws.post(
            ch,
            user=BOT_USER_ID,
            text=args.get("initial_comment") or "",
            blocks=None,
            thread_ts=args.get("thread_ts"),
            files=shared,
        )
    return {"files": copy.deepcopy(shared)}


METHODS: dict[str, ApiMethod] = {
    "files.getUploadURLExternal": get_upload_url,
    "files.completeUploadExternal": complete_upload,
}
