"""A counting reverse proxy in front of the local Polyaxon server: what the benches and the outage tests put
between the bot and Polyaxon to count its requests, or to make Polyaxon look down (503) while it is not."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CountingProxy:
    """A real HTTP reverse proxy on 127.0.0.1 that counts the requests it forwards."""

    def __init__(self, target_host: str) -> None:
        self.target = target_host.removeprefix("http://")
        self.requests: list[tuple[str, str]] = []
        # While set, every request gets a 503, as from a Polyaxon behind a load balancer that is down (`refuse` makes
        # it refuse connections instead, as a stopped server does).
        self.down = False
        # Connections open now (HTTP/1.1 keeps them): `refuse` cuts them too, as a stopped server's go.
        self._open: set[socket.socket] = set()
        # The next requests of a method answered with a status instead of forwarded (`answer_next`).
        self._refusals: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy._open.add(self.connection)

            def finish(self) -> None:
                with proxy._lock:
                    proxy._open.discard(self.connection)
                super().finish()

            def _forward(self) -> None:
                proxy.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                refused = proxy._take_refusal(self.command)
                if refused:
                    # As the sandbox answers an overlapping write now and then: a status, no body.
                    self.send_response(refused, http.client.responses.get(refused, ""))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if proxy.down:
                    self.send_response(503, "Service Unavailable")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = http.client.HTTPConnection(proxy.target, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in {"host", "connection"}}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                payload = response.read()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in {"transfer-encoding", "connection", "content-length"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                upstream.close()

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _forward

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._handler = Handler
        self._server: ThreadingHTTPServer | None = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer_next(self, method: str, status: int, count: int = 1) -> None:
        """Answer the next `count` requests of `method` with `status` (e.g. PATCH 405), forwarding none of them."""
        with self._lock:
            self._refusals.setdefault(method.upper(), []).extend([status] * count)

    def _take_refusal(self, method: str) -> int | None:
        with self._lock:
            waiting = self._refusals.get(method)
            return waiting.pop(0) if waiting else None

    @property
    def host(self) -> str:
        """The proxy's base URL."""
        return f"http://127.0.0.1:{self._port}"

    def refuse(self) -> None:
        """Stop listening: a connection is refused, as by a Polyaxon server that is stopped (a redeploy)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            live = list(self._open)
        for connection in live:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def listen_again(self) -> None:
        """Listen again on the same port (the server is back)."""
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", self._port), self._handler)
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
            self._thread.start()

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.refuse()
