"""HttpServer.stop: the listening socket is closed and the serving thread ends, even when waitress's trigger is gone."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from typing import Any

from bot.web import HttpServer


def hello(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hi"]


def refuses(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_stop_closes_the_port_and_ends_the_thread() -> None:
    server = HttpServer(hello, "127.0.0.1", 0).start()
    thread = server._thread
    assert not refuses(server.port)
    server.stop()
    assert refuses(server.port)
    assert thread is not None and not thread.is_alive()


def test_stop_still_closes_the_port_when_the_trigger_pipe_was_already_closed() -> None:
    # What one fresh-clone run hit at a fixture's teardown: os.write on the trigger raised EBADF.
    server = HttpServer(hello, "127.0.0.1", 0).start()
    thread = server._thread
    server._server.trigger.close()
    server.stop()
    assert refuses(server.port)
    assert thread is not None and not thread.is_alive()


def test_stop_ends_every_request_thread() -> None:
    before = threading.active_count()
    server = HttpServer(hello, "127.0.0.1", 0, threads=8).start()
    assert threading.active_count() >= before + 8
    server.stop()
    assert threading.active_count() == before
