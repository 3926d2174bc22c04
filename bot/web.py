"""`finetune-bot serve`: HTTP (`POST /slack/events` on waitress) or Socket Mode, plus `/healthz` and `/metrics`."""

from __future__ import annotations

import gc
import io
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.socket_mode.internals import run_bolt_app, send_response
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from sqlalchemy import text
from waitress import wasyncore
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from bot.app import build_app
from bot.services import Services
from bot.settings import Settings

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

logger = logging.getLogger("finetune_bot.web")

EVENTS_PATH = "/slack/events"
# Request threads only wait for an ack (the work runs in Bolt's listener pool), so they are cheap;
# enough of them that a burst of deliveries is never queued behind a small pool.
HTTP_THREADS = 32
_SOCKET_KINDS = {"slash_commands": "command", "events_api": "event", "interactive": "action"}


def sniff_kind(body: bytes, content_type: str) -> str:
    """command, event, action or other, from the raw body of a Slack POST (before Bolt parses it)."""
    if content_type.startswith("application/json"):
        return "event"
    if body.startswith(b"payload=") or b"&payload=" in body:
        return "action"
    if b"command=" in body:
        return "command"
    return "other"


class BotWsgiApp:
    """Routes `POST /slack/events` to Bolt's WSGI adapter (which verifies signatures), `/healthz`, `/metrics`."""

    def __init__(self, app: App | None, services: Services) -> None:
        self.bolt = SlackRequestHandler(app, path=EVENTS_PATH) if app is not None else None
        self.services = services

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI entry point."""
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == EVENTS_PATH and self.bolt is not None:
            if method != "POST":
                return _plain(start_response, "405 Method Not Allowed", b"POST only\n")
            return self._slack(environ, start_response)
        if path == "/healthz" and method in ("GET", "HEAD"):
            return self._healthz(start_response)
        if path == "/metrics" and method in ("GET", "HEAD"):
            body, content_type = self.services.metrics.render()
            start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
            return [body]
        return _plain(start_response, "404 Not Found", b"not found\n")

    def _slack(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        assert self.bolt is not None
        started = time.perf_counter()
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        # Bolt reads the body itself: hand it a fresh stream over the bytes read here.
        environ["wsgi.input"] = io.BytesIO(raw)
        kind = sniff_kind(raw, environ.get("CONTENT_TYPE", ""))
        status_holder: list[int] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
            status_holder.append(int(status.split(" ", 1)[0]))
            return start_response(status, headers, exc_info)

        self.services.acks.enter()
        try:
            result = list(self.bolt(environ, capture))
        finally:
            self.services.acks.leave()
        status = status_holder[0] if status_holder else 500
        elapsed = time.perf_counter() - started
        self.services.metrics.observe_ack(kind, status, elapsed)
        # Kind, status and timing only: bodies carry response_urls and user text.
        logger.info("slack %s answered %d in %.1f ms", kind, status, elapsed * 1e3)
        return result

    def _healthz(self, start_response: StartResponse) -> Iterable[bytes]:
        try:
            with self.services.sessions() as session:
                session.execute(text("SELECT 1"))
        except Exception as exc:
            body = json.dumps({"status": "unhealthy", "database": type(exc).__name__}).encode()
            start_response("503 Service Unavailable", [("Content-Type", "application/json")])
            return [body]
        body = json.dumps({"status": "ok"}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def _plain(start_response: StartResponse, status: str, body: bytes) -> Iterable[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]


class HttpServer:
    """waitress serving a WSGI app on host:port (0 = a free port), in the foreground or a background thread."""

    def __init__(
        self, wsgi_app: Callable[..., Iterable[bytes]], host: str, port: int, threads: int = HTTP_THREADS
    ) -> None:
        server = create_server(
            wsgi_app,
            host=host,
            port=port,
            threads=threads,
            ident="finetune-bot",
            connection_limit=1000,
            backlog=1024,
            channel_timeout=60,
            clear_untrusted_proxy_headers=True,
        )
        if isinstance(server, MultiSocketServer):
            raise ValueError(f"expected one listening socket for {host}:{port}")
        self._server: BaseWSGIServer = server
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.effective_port)

    @property
    def url(self) -> str:
        """http://HOST:PORT."""
        return f"http://{self._server.effective_host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve in this thread until `stop()`."""
        self._server.run()

    def start(self) -> HttpServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="http-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listening socket and every connection; the serving loop then ends."""
        server_map = self._server._map
        # Close inside the serving loop (a trigger thunk): closing from this thread races its select().
        self._server.trigger.pull_trigger(lambda: wasyncore.close_all(server_map))
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


class MeteredSocketModeHandler(SocketModeHandler):
    """Bolt's Socket Mode handler (builtin client), timing each envelope from receipt to ack."""

    def __init__(self, app: App, app_token: str, services: Services) -> None:
        super().__init__(app, app_token=app_token, concurrency=HTTP_THREADS)
        self.services = services

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        """Dispatch to Bolt, send the ack over the socket, record the latency."""
        started = time.perf_counter()
        self.services.acks.enter()
        try:
            bolt_resp = run_bolt_app(self.app, req)
            send_response(client, req, bolt_resp, started)
        finally:
            self.services.acks.leave()
        kind = _SOCKET_KINDS.get(req.type, "other")
        elapsed = time.perf_counter() - started
        self.services.metrics.observe_ack(kind, bolt_resp.status, elapsed)
        logger.info("slack %s (socket mode) answered %d in %.1f ms", kind, bolt_resp.status, elapsed * 1e3)


def freeze_startup_heap() -> None:
    """Exempt everything allocated at start-up (imports, catalog, app) from the cyclic garbage collector.

    Those objects live as long as the process; without this, each full collection walks them all and
    pauses every thread, acks included, for tens of milliseconds.
    """
    gc.collect()
    gc.freeze()


def build_http_server(
    settings: Settings, services: Services, host: str, port: int, app: App | None = None
) -> HttpServer:
    """The HTTP server of `serve` (pass `app=None` for only /healthz and /metrics, as in Socket Mode)."""
    return HttpServer(BotWsgiApp(app, services), host, port)


def run_serve(settings: Settings, services: Services, host: str, port: int, app: App | None = None) -> None:
    """Serve until SIGTERM/SIGINT: Socket Mode when an app token is set (HTTP keeps /healthz, /metrics), else HTTP."""
    if app is None:
        app = build_app(settings, services)
    freeze_startup_heap()
    stop = threading.Event()
    if settings.slack.socket_mode:
        assert settings.slack.app_token is not None
        handler = MeteredSocketModeHandler(app, settings.slack.app_token.get_secret_value(), services)
        http = build_http_server(settings, services, host, port, app=None).start()
        handler.connect()
        logger.info("serving Slack over Socket Mode; /healthz and /metrics on %s", http.url)

        def _stop_socket(signum: int, _frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, _stop_socket)
        signal.signal(signal.SIGINT, _stop_socket)
        try:
            stop.wait()
        finally:
            handler.close()
            http.stop()
            services.work.shutdown()  # finish the work of deliveries already acked
        return
    http = build_http_server(settings, services, host, port, app=app)
    logger.info("serving Slack over HTTP on %s%s (and /healthz, /metrics)", http.url, EVENTS_PATH)

    def _stop_http(signum: int, _frame: FrameType | None) -> None:
        # The serving loop runs in this (main) thread: close its sockets from a helper thread.
        threading.Thread(target=http.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop_http)
    signal.signal(signal.SIGINT, _stop_http)
    try:
        http.serve_forever()
    finally:
        services.work.shutdown()  # finish the work of deliveries already acked
