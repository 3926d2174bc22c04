"""Slack's side of Socket Mode: a websocket endpoint that sends envelopes and collects the app's acks."""

from __future__ import annotations

import json
import secrets
import threading
import uuid
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve


class SocketModeEndpoint:
    """One websocket server on 127.0.0.1; `apps.connections.open` hands out its URL."""

    def __init__(self) -> None:
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connected = threading.Condition(self._lock)
        self._connections: list[ServerConnection] = []
        self._acks: dict[str, dict[str, Any]] = {}
        self._ack_arrived = threading.Condition(self._lock)
        self._tickets: set[str] = set()

    def start(self) -> None:
        """Listen on a free port."""
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None)
        self._thread = threading.Thread(target=self._server.serve_forever, name="slack-socket-mode", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close every connection and stop listening."""
        self.drop_connections()
        if self._server is not None:
            self._server.shutdown()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def drop_connections(self) -> None:
        """Close every app connection from Slack's side, as Slack does when it cycles them. An app closing its
        own connection otherwise waits for its read to time out (slack_sdk's builtin client: 3 s)."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()

    def new_url(self) -> str:
        """A one-time websocket URL, as `apps.connections.open` returns."""
        if self._server is None:
            raise RuntimeError("the Socket Mode endpoint is not started")
        port = self._server.socket.getsockname()[1]
        ticket = secrets.token_hex(8)
        with self._lock:
            self._tickets.add(ticket)
        return f"ws://127.0.0.1:{port}/link/?ticket={ticket}&app_id=A0LOCAL01"

    def wait_connected(self, timeout: float = 10.0) -> bool:
        """Block until an app holds a connection."""
        with self._connected:
            return self._connected.wait_for(lambda: bool(self._connections), timeout=timeout)

    @property
    def connection_count(self) -> int:
        """How many app connections are open."""
        with self._lock:
            return len(self._connections)

    def deliver(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = 10.0,
    ) -> dict[str, Any] | None:
        """Send one envelope (`slash_commands`, `events_api`, `interactive`); return the app's ack or None."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        with self._lock:
            if not self._connections:
                raise RuntimeError("no Socket Mode connection")
            conn = self._connections[-1]
        conn.send(json.dumps(envelope))
        with self._ack_arrived:
            self._ack_arrived.wait_for(lambda: envelope_id in self._acks, timeout=timeout)
            return self._acks.pop(envelope_id, None)

    def _handle(self, conn: ServerConnection) -> None:
        request = conn.request
        ticket = ""
        if request is not None and "ticket=" in request.path:
            ticket = request.path.split("ticket=", 1)[1].split("&", 1)[0]
        with self._lock:
            if ticket not in self._tickets:
                conn.close(code=1008, reason="invalid ticket")
                return
            self._tickets.discard(ticket)
        conn.send(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "debug_info": {"host": "standin", "approximate_connection_time": 3600},
                    "connection_info": {"app_id": "A0LOCAL01"},
                }
            )
        )
        with self._connected:
            self._connections.append(conn)
            self._connected.notify_all()
        try:
            for raw in conn:
                message = json.loads(raw)
                envelope_id = message.get("envelope_id")
                if envelope_id:
                    with self._ack_arrived:
                        self._acks[envelope_id] = message
                        self._ack_arrived.notify_all()
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                if conn in self._connections:
                    self._connections.remove(conn)
