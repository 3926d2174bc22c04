"""The stand-in's HTTP plumbing: a threading server on 127.0.0.1 and the handler that routes to the stand-in."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from bot.local.slack.server import SlackStandIn


def serve(standin: SlackStandIn) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Bind 127.0.0.1 on a free port and serve `standin` from a background thread."""
    handler = type("_BoundHandler", (_Handler,), {"standin": standin})
    httpd = _Server(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=lambda: httpd.serve_forever(poll_interval=0.05), name="slack-standin", daemon=True)
    thread.start()
    return httpd, thread


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog is 5: a burst of replies (100 `help` answers at once) overflowed it and the
    # kernel reset connections, which Slack's own front never does.
    request_queue_size = 1024


def shut_down(httpd: ThreadingHTTPServer, thread: threading.Thread) -> None:
    """Stop serving, close the socket and wait for the serving thread."""
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


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
            retry_after = self.standin.state.take_rate_limit("response_url")
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
