"""A stand-in for Polyaxon's run API, for benches at more runs than the local server can be seeded with quickly.

It answers the requests the watcher makes, with the API's paths and JSON shapes (the real `polyaxon` client
parses its answers): list runs (with the query conditions the bot uses: `status:~a|b`, `pipeline.uuid:nil`,
`updated_at:>=ISO`, `name:X`; `sort`, `limit`, `offset`), get a run, its statuses and its lineage. Runs live
in memory; `change()` does what Polyaxon does on an outputs sync or a status change: `updated_at` moves.
Not a test double for correctness (tests use the real server): only the cost of a tick is measured against it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

PROJECT = re.compile(r"^/api/v1/(?P<owner>[^/]+)/(?P<project>[^/]+)$")
RUNS = re.compile(r"^/api/v1/(?P<owner>[^/]+)/(?P<project>[^/]+)/runs(?:/(?P<uuid>[0-9a-f]{32})(?P<rest>/.*)?)?$")


class PolyaxonStub:
    """An in-memory project of runs behind Polyaxon's run endpoints, on 127.0.0.1."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> PolyaxonStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, uuid: str, name: str, *, status: str, at: datetime) -> None:
        """A run as Polyaxon would list it (created and last changed at `at`)."""
        with self.lock:
            self.runs[uuid] = {
                "uuid": uuid,
                "name": name,
                "kind": "job",
                "status": status,
                "created_at": at,
                "updated_at": at,
                "started_at": at if status == "running" else None,
                "finished_at": None,
                "inputs": {},
                "outputs": {},
                "tags": [],
            }

    def change(self, uuid: str, *, status: str | None = None, outputs: dict[str, Any] | None = None) -> None:
        """An outputs sync or a status change: the run's `updated_at` moves to now."""
        now = datetime.now(UTC)
        with self.lock:
            run = self.runs[uuid]
            run["outputs"] = {**run["outputs"], **(outputs or {})}
            if status is not None:
                run["status"] = status
                if status in {"succeeded", "failed", "stopped"}:
                    run["finished_at"] = now
            run["updated_at"] = now

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        project = PROJECT.match(path)
        if project is not None:
            return 200, {"name": project["project"], "owner": project["owner"]}
        match = RUNS.match(path)
        if match is None:
            return 404, {"detail": "not found"}
        uuid, rest = match["uuid"], match["rest"] or ""
        with self.lock:
            if uuid is None:
                return 200, self._list(query)
            run = self.runs.get(uuid)
            if run is None:
                return 404, {"detail": "not found"}
            if rest == "":
                return 200, _json(run)
            if rest == "/statuses":
                condition = {"type": run["status"], "status": "True", "reason": "Stub", "message": None}
                condition["last_transition_time"] = condition["last_update_time"] = _iso(run["updated_at"])
                return 200, {"uuid": uuid, "status": run["status"], "status_conditions": [condition]}
            if rest == "/lineage/artifacts":
                metrics = [
                    {"name": k, "kind": "metric", "summary": {"metric": {"last": v}, "step": {"max": 1}}}
                    for k, v in run["outputs"].items()
                    if isinstance(v, int | float)
                ]
                return 200, {"count": len(metrics), "results": metrics}
        return 404, {"detail": "not found"}

    def _list(self, query: dict[str, list[str]]) -> dict[str, Any]:
        matches = _predicate((query.get("query") or [""])[0])
        runs = [r for r in self.runs.values() if matches(r)]
        sort = (query.get("sort") or ["-created_at"])[0]
        runs.sort(key=lambda r: r[sort.lstrip("-")], reverse=sort.startswith("-"))
        offset, limit = int((query.get("offset") or ["0"])[0]), int((query.get("limit") or ["20"])[0])
        return {"count": len(runs), "results": [_json(r) for r in runs[offset : offset + limit]]}


def _predicate(query: str) -> Callable[[dict[str, Any]], bool]:
    """The query's conditions, parsed once, as one test of a run."""
    excluded: frozenset[str] = frozenset()
    name: str | None = None
    since: datetime | None = None
    strict = False
    for condition in filter(None, (c.strip() for c in query.split(","))):
        field, _, value = condition.partition(":")
        if field == "status" and value.startswith("~"):
            excluded = frozenset(value[1:].split("|"))
        elif field == "pipeline.uuid":
            continue  # the stub's runs are all top-level
        elif field == "name":
            name = value
        elif field == "updated_at":
            strict = not value.startswith(">=")
            since = datetime.fromisoformat(value[1:] if strict else value[2:]).astimezone(UTC)
        else:
            raise ValueError(f"the stub does not know the query condition {condition!r}")

    def matches(run: dict[str, Any]) -> bool:
        if run["status"] in excluded or (name is not None and run["name"] != name):
            return False
        if since is None:
            return True
        return bool(run["updated_at"] > since if strict else run["updated_at"] >= since)

    return matches


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _json(run: dict[str, Any]) -> dict[str, Any]:
    return {k: _iso(v) if isinstance(v, datetime) else v for k, v in run.items()}


def _handler(stub: PolyaxonStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            status, body = stub.answer(url.path, parse_qs(url.query))
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def seeded(count: int, waiting: int = 0) -> PolyaxonStub:
    """A started stub with `count` running runs, submitted a second apart (oldest first), then `waiting` queued
    runs submitted in one burst, 10 ms apart (up to 100 of them within the change feed's overlap of the newest)."""
    stub = PolyaxonStub().start()
    start = datetime.now(UTC) - timedelta(seconds=count + waiting / 100 + 5)
    for i in range(count):
        stub.add(f"{i:032x}", f"bench-{i}", status="running", at=start + timedelta(seconds=i))
    for n, i in enumerate(range(count, count + waiting)):
        stub.add(f"{i:032x}", f"bench-{i}", status="queued", at=start + timedelta(seconds=count + n / 100))
    return stub
