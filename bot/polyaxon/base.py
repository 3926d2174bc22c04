"""The gateway's plumbing: the explicitly built client, error translation, retried writes, run decoding.

Every method returns the bot's own pydantic models and raises `GatewayError` (never a Polyaxon
exception); a `None` where the client promised a value is an error too. The client is built
explicitly from the constructor's arguments, never from `$HOME` or the environment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from bot.polyaxon.types import (
    GatewayError,
    PolyaxonUnreachableError,
    ProjectMissingError,
    RunGoneError,
    RunInfo,
    RunNotFoundError,
)

T = TypeVar("T")

# Statuses on which a spurious sandbox failure is retried (405 on overlapping writes, 5xx while
# SQLite is locked, 409 on an overlapping status transition).
_RETRY_STATUSES = frozenset({405, 409, 429, 500, 502, 503, 504})
# What stands in front of Polyaxon answers these while the API itself is down or being redeployed.
_GATEWAY_DOWN = frozenset({502, 503, 504})
# Polyaxon's 404 bodies name what is missing (Django's "No <Model> matches the given query."): a run's
# endpoints answer with the run's, or the project's when the whole project is gone (a replaced server).
_NO_RUN = "No Run matches"
_NO_PROJECT = "No Project matches"
# A run whose deletion Polyaxon has begun: still readable by uuid, gone from every list (`live_state`).
_DELETION_IN_PROGRESS = -1


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        raise GatewayError(f"Polyaxon returned a non-date timestamp: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _transport_cause(exc: BaseException) -> str:
    """What a failed connection came to, in words: urllib3 wraps the cause (`MaxRetryError` around a
    `NewConnectionError` around `ConnectionRefusedError`) in text nobody needs to read."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes, never followed round a cycle
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return "connection refused"
        if isinstance(seen, TimeoutError) or "timed out" in str(seen).lower():
            return "no answer in time"
        if isinstance(seen, ConnectionResetError) or "reset by peer" in str(seen) or "RemoteDisconnected" in str(seen):
            return "connection dropped"
        if "Name or service not known" in str(seen) or "nodename nor servname" in str(seen):
            return "host name not found"
        reason = getattr(seen, "reason", None)
        seen = reason if isinstance(reason, BaseException) else seen.__cause__ or seen.__context__
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    reason = getattr(exc, "reason", None)
    if status is not None:
        detail = body if body else reason
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        return f"HTTP {status}: {str(detail)[:500]}"
    return f"{type(exc).__name__}: {str(exc)[:500]}"


class GatewayBase:
    """One Polyaxon project through an explicitly configured client; the topic classes build on this."""

    def __init__(
        self,
        *,
        host: str,
        token: str | None,
        owner: str = "default",
        project: str = "finetune",
        timeout_s: float = 10.0,
        write_attempts: int = 5,
        pool_size: int = 40,
    ) -> None:
        # Imported here, once per gateway: the client costs 3-4 s to import. (Whoever imports
        # polyaxon first must have POLYAXON_NO_CONFIG=true set, or it reads config from $HOME.) From its own
        # module: `polyaxon.client` also brings the run/project clients and, with them, Kubernetes' models
        # (~80 MB, ~1,000 modules) that the API calls never use.
        from polyaxon._client.client import PolyaxonClient
        from polyaxon._schemas.client import ClientConfig
        from polyaxon.exceptions import ApiException, PolyaxonClientException
        from urllib3.exceptions import HTTPError

        # The client logs each failed call at ERROR, showing the *global* client config (not this gateway's
        # host), before raising; the gateway turns the exception into a GatewayError its caller reports once.
        logging.getLogger("polyaxon.cli").setLevel(logging.CRITICAL)
        self.host = host.rstrip("/")
        self.owner = owner
        self.project = project
        self.timeout_s = timeout_s
        self.write_attempts = write_attempts
        self._api_errors: tuple[type[BaseException], ...] = (ApiException,)
        self._transport_errors: tuple[type[BaseException], ...] = (HTTPError, PolyaxonClientException, OSError)
        # retries=0: urllib3 would otherwise retry each request 3 times, multiplying the timeout;
        # the gateway retries writes itself, where that is safe.
        self._config = ClientConfig(
            host=self.host,
            token=token,
            use_https=self.host.startswith("https"),
            verify_ssl=self.host.startswith("https"),
            timeout=timeout_s,
            retries=0,
            # One connection per concurrent caller: the commands' work threads (32) and the watcher. The client's
            # default (5 per core: 10 on 2 cores) made bursts open and drop a connection per request.
            connection_pool_maxsize=pool_size,
        )
        self._client = PolyaxonClient(config=self._config, token=token)
        self._namespaces: dict[str, str] = {}

    # Plumbing -------------------------------------------------------------------------------

    def _fail(self, what: str, exc: BaseException, *, run: str | None = None) -> GatewayError:
        """The bot's error for a failed call; `run`: the uuid the call was about, so a 404 says the run is gone."""
        if isinstance(exc, self._api_errors) and getattr(exc, "status", None) == 404:
            detail = _describe(exc)
            if run is not None and (_NO_RUN in detail or _NO_PROJECT in detail):
                return RunGoneError(run, self.host, detail)
            if _NO_PROJECT in detail:
                return ProjectMissingError(
                    f"Polyaxon at {self.host} has no project {self.owner}/{self.project} (while trying to {what})"
                )
            return RunNotFoundError(f"Polyaxon at {self.host}: {what}: not found ({detail})")
        if isinstance(exc, self._transport_errors) and not isinstance(exc, self._api_errors):
            return PolyaxonUnreachableError(
                self.host,
                f"Polyaxon at {self.host} is unreachable or did not answer within {self.timeout_s:.0f} s "
                f"while trying to {what} ({_transport_cause(exc)})",
            )
        if isinstance(exc, self._api_errors) and getattr(exc, "status", None) in _GATEWAY_DOWN:
            # What a load balancer or ingress answers while Polyaxon's API is down or being redeployed.
            return PolyaxonUnreachableError(
                self.host, f"Polyaxon at {self.host} is not answering while trying to {what} ({_describe(exc)})"
            )
        return GatewayError(f"Polyaxon at {self.host} refused to {what}: {_describe(exc)}")

    def _read(self, what: str, call: Callable[[], T | None], *, run: str | None = None) -> T:
        try:
            result = call()
        except GatewayError:
            raise
        except Exception as exc:
            raise self._fail(what, exc, run=run) from exc
        if result is None:
            raise GatewayError(f"Polyaxon at {self.host} returned nothing while trying to {what}")
        return result

    def _write(
        self,
        what: str,
        call: Callable[[], T | None],
        *,
        landed: Callable[[], T | None] | None = None,
        run: str | None = None,
    ) -> T:
        """Run a write with retries on the sandbox's spurious failures.

        `landed` checks whether an earlier attempt took effect after all, so a retried create
        never makes a second object.
        """
        last: BaseException | None = None
        for attempt in range(1, self.write_attempts + 1):
            if attempt > 1 and landed is not None:
                existing = self._read(f"check whether {what} landed", lambda: [landed()], run=run)[0]
                if existing is not None:
                    return existing
            try:
                result = call()
            except Exception as exc:
                status = getattr(exc, "status", None)
                retryable = (isinstance(exc, self._api_errors) and status in _RETRY_STATUSES) or (
                    isinstance(exc, self._transport_errors) and not isinstance(exc, self._api_errors)
                )
                if not retryable or attempt == self.write_attempts:
                    raise self._fail(what, exc, run=run) from exc
                last = exc
                time.sleep(0.15 * 2**attempt)
                continue
            if result is None:
                raise GatewayError(f"Polyaxon at {self.host} returned nothing while trying to {what}")
            return result
        raise self._fail(what, last or RuntimeError("no attempt made"), run=run)

    def _run_from_api(self, run: Any) -> RunInfo:
        if run is None or not getattr(run, "uuid", None):
            raise GatewayError(f"Polyaxon at {self.host} returned an empty run")
        namespace = getattr(getattr(run, "settings", None), "namespace", None)
        if namespace:
            self._namespaces[run.uuid] = namespace
        original = getattr(run, "original", None)
        return RunInfo(
            uuid=run.uuid,
            name=run.name or "",
            status=str(run.status or "created"),
            created_at=_utc(run.created_at),
            started_at=_utc(run.started_at),
            finished_at=_utc(run.finished_at),
            updated_at=_utc(getattr(run, "updated_at", None)),
            inputs=dict(run.inputs or {}),
            outputs=dict(run.outputs or {}),
            tags=list(run.tags or []),
            description=run.description,
            original_uuid=getattr(original, "uuid", None) if original else None,
            pending=str(run.pending) if getattr(run, "pending", None) else None,
        )

    def _get_live_run(self, uuid: str) -> Any:
        """The run as Polyaxon has it (one request); RunGoneError when Polyaxon no longer has it."""
        raw = self._read(
            f"get run {uuid}", lambda: self._client.runs_v1.get_run(self.owner, self.project, uuid), run=uuid
        )
        if getattr(raw, "live_state", None) == _DELETION_IN_PROGRESS:
            raise RunGoneError(uuid, self.host, "its deletion is in progress there")
        return raw

    def _namespace(self, uuid: str, *, fresh: bool = False) -> str:
        """The namespace a run's logs and events are keyed by; `fresh`: read the run again (is it still there?)."""
        if fresh or uuid not in self._namespaces:
            # Decoding the run records its namespace.
            self._run_from_api(self._get_live_run(uuid))
        return self._namespaces.get(uuid, "polyaxon")

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()
