"""`finetune-bot serve`: HTTP (`POST /slack/events` on waitress) or Socket Mode, plus `/healthz` and `/metrics`."""

from __future__ import annotations

import gc
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.socket_mode.internals import send_response
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from sqlalchemy import text
from waitress import wasyncore
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from bot.app import build_app
from bot.frontdoor import MAX_BODY_BYTES, Answer, FrontDoor
from bot.services import Services
from bot.settings import Settings

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

logger = logging.getLogger("finetune_bot.web")

EVENTS_PATH = "/slack/events"
# Request threads only ack (the work runs on the work pool afterwards), but each waits for the intake's commit: with
# 32 of them a burst of 100 deliveries queued in waitress behind threads that were only waiting ("Task queue depth"
# 161 times in `python -m bench.ack --rounds 4`, run acks p50 1.41x the bare app). With 128 a burst is admitted
# in one or two commits: no queueing logged, run acks p50 1.19x and p99 1.33x (one run each, 2 cores). An idle
# thread costs a few KB.
HTTP_THREADS = 128
# waitress buffers a whole body before the app sees it: past this it refuses (413) without buffering. The front
# door's own limit (MAX_BODY_BYTES, logged and counted) is lower, so waitress's is only the backstop.
SERVER_BODY_CEILING = 8 * MAX_BODY_BYTES


class BotWsgiApp:
    """Routes `POST /slack/events` through the front door to Bolt, and serves `/healthz`, `/metrics`."""

    def __init__(
        self, app: App | None, services: Services, signing_secret: str | None = None, *, access_log: bool = False
    ) -> None:
        self.door = FrontDoor(app, services, signing_secret=signing_secret) if app is not None else None
        self.services = services
        self.access_log = access_log  # FINETUNE_ACCESS_LOG: answered requests at INFO (`log_answer`)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI entry point."""
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == EVENTS_PATH and self.door is not None:
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
        assert self.door is not None
        started = time.perf_counter()
        self.services.acks.enter()
        try:
            answer = self.door.answer_http(environ)
        finally:
            self.services.acks.leave()
        record_answer(self.services, answer, time.perf_counter() - started, access_log=self.access_log)
        status, headers, body = answer.wsgi()
        start_response(status, headers)
        return body

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
            max_request_body_size=SERVER_BODY_CEILING,
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
        """Close the listening socket and every connection; the serving loop and the request threads then end."""
        server_map = self._server._map
        # Close inside the serving loop (a trigger thunk): closing from this thread races its select().
        try:
            self._server.trigger.pull_trigger(lambda: wasyncore.close_all(server_map))
        except OSError:
            # The trigger's pipe is already gone: the loop saw it end and closed it, so it no longer selects on
            # it. Seen once in 2,411 tests on a fresh clone; the listening socket still has to be closed.
            wasyncore.close_all(server_map, ignore_all=True)
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        # waitress leaves its request threads running after the loop ends: each stopped server would keep them all.
        self._server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)


class MeteredSocketModeHandler(SocketModeHandler):
    """Bolt's Socket Mode handler (builtin client) behind the front door, timing each envelope from receipt to ack."""

    def __init__(self, app: App, app_token: str, services: Services, *, access_log: bool = False) -> None:
        super().__init__(app, app_token=app_token, concurrency=HTTP_THREADS)
        self.services = services
        self.access_log = access_log
        self.door = FrontDoor(app, services, signing_secret=None)

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        """Screen and dispatch to Bolt, send the ack over the socket, record the latency."""
        started = time.perf_counter()
        self.services.acks.enter()
        try:
            answer = self.door.answer_socket(req.type, req.payload)
            if answer.bolt is not None:
                send_response(client, req, answer.bolt, started)
            else:
                # Acked all the same: Slack would resend a malformed envelope it got no ack for, again and again.
                client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        finally:
            self.services.acks.leave()
        record_answer(
            self.services, answer, time.perf_counter() - started, access_log=self.access_log, via=" (socket mode)"
        )


def record_answer(services: Services, answer: Answer, elapsed: float, *, access_log: bool, via: str = "") -> None:
    """Count and time the answer in /metrics, then `log_answer` it: what both front doors (HTTP, Socket Mode) do
    once a delivery is answered."""
    services.metrics.observe_ack(answer.kind, answer.status, elapsed)
    log_answer(answer, elapsed, access_log=access_log, via=via)


def log_answer(answer: Answer, elapsed: float, *, access_log: bool, via: str = "") -> None:
    """The request's one line: kind, status, timing and, when refused, why; never the body or a header's value.

    A refusal at WARNING; an answer of 400 or more from Bolt (no listener took it, or one failed) at INFO; any other
    answer at INFO with FINETUNE_ACCESS_LOG, else at DEBUG. Written for every request of a burst, the INFO line
    cost acks more than anything else left on their path (bot/logwriter.py); /metrics counts and times every
    answer either way, and each delivery's work logs its own line after the ack.
    """
    if answer.refused is not None:
        level = logging.WARNING
    else:
        level = logging.INFO if access_log or answer.status >= 400 else logging.DEBUG
    if logger.isEnabledFor(level):
        logger.log(
            level,
            "slack %s%s answered %d in %.1f ms%s",
            answer.kind,
            via,
            answer.status,
            elapsed * 1e3,
            answer.log_suffix(),
        )


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
    secret = settings.slack.signing_secret.get_secret_value() if settings.slack.signing_secret is not None else None
    wsgi = BotWsgiApp(app, services, signing_secret=secret, access_log=settings.finetune.access_log)
    return HttpServer(wsgi, host, port)


def run_serve(settings: Settings, services: Services, host: str, port: int, app: App | None = None) -> None:
    """Serve until SIGTERM/SIGINT: Socket Mode when an app token is set (HTTP keeps /healthz, /metrics), else HTTP."""
    if app is None:
        app = build_app(settings, services)
    freeze_startup_heap()
    stop = threading.Event()
    if settings.slack.socket_mode:
        assert settings.slack.app_token is not None
        handler = MeteredSocketModeHandler(
            app, settings.slack.app_token.get_secret_value(), services, access_log=settings.finetune.access_log
        )
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
