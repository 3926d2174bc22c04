"""Prometheus metrics of the bot, in an explicit registry (never the global one)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

# Slack's ack deadline is 3 s: the buckets resolve the range below it finely and flag anything above.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)


class BotMetrics:
    """Every metric the bot exports; `render()` gives the Prometheus text exposition."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "finetune_bot_slack_requests",
            "Slack deliveries received, by kind and HTTP status",
            ["kind", "status"],
            registry=self.registry,
        )
        self.acks = Counter(
            "finetune_bot_slack_acks",
            "Slack deliveries acknowledged (HTTP 200 / Socket Mode ack)",
            ["kind"],
            registry=self.registry,
        )
        self.ack_latency = Histogram(
            "finetune_bot_slack_ack_latency_seconds",
            "Time from receiving a delivery to acknowledging it",
            ["kind"],
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.duplicates = Counter(
            "finetune_bot_slack_duplicate_deliveries",
            "Retried or duplicate deliveries acknowledged and skipped",
            ["kind"],
            registry=self.registry,
        )
        self.slack_api_errors = Counter(
            "finetune_bot_slack_api_errors",
            "Failed Slack Web API / response_url calls (each attempt)",
            ["method", "error"],
            registry=self.registry,
        )
        self.polyaxon_errors = Counter(
            "finetune_bot_polyaxon_errors",
            "Failed Polyaxon API calls",
            ["operation"],
            registry=self.registry,
        )
        self.listener_errors = Counter(
            "finetune_bot_listener_errors",
            "Exceptions that reached the app's error handler",
            ["kind"],
            registry=self.registry,
        )
        self.refused = Counter(
            "finetune_bot_requests_refused",
            "Slack requests refused at the front door (too large, wrong content type, unsigned, malformed)",
            ["reason"],
            registry=self.registry,
        )
        self._children: dict[str, tuple[Any, Any]] = {}

    def observe_ack(self, kind: str, status: int, seconds: float) -> None:
        """Record one answered delivery."""
        self.requests.labels(kind=kind, status=str(status)).inc()
        if status == 200:
            acks, latency = self._ack_children(kind)
            acks.inc()
            latency.observe(seconds)

    def _ack_children(self, kind: str) -> tuple[Any, Any]:
        # Resolved once per kind: label lookups are on the ack path of every delivery.
        children = self._children.get(kind)
        if children is None:
            children = (self.acks.labels(kind=kind), self.ack_latency.labels(kind=kind))
            self._children[kind] = children
        return children

    def render(self) -> tuple[bytes, str]:
        """(body, content type) for `GET /metrics`."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def slack_call_observer(self) -> RetryHandler:
        """A retry handler that never retries but counts every failed Slack call; put it first in the list."""
        return SlackCallObserver(self)


class SlackCallObserver(RetryHandler):
    """Sees each Slack HTTP attempt before the real retry handlers do, and counts failures."""

    def __init__(self, metrics: BotMetrics) -> None:
        # A huge budget so `can_retry` always reaches `_can_retry`, whatever attempt the request is on.
        super().__init__(max_retry_count=1_000_000)
        self.metrics = metrics

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        method = _method_of(request.url)
        if error is not None and response is None:
            self.metrics.slack_api_errors.labels(method=method, error=type(error).__name__).inc()
        elif response is not None:
            if response.status_code == 429:
                self.metrics.slack_api_errors.labels(method=method, error="ratelimited").inc()
            elif response.status_code >= 400:
                self.metrics.slack_api_errors.labels(method=method, error=f"http_{response.status_code}").inc()
            else:
                body: Any = response.body
                if isinstance(body, dict) and body.get("ok") is False:
                    self.metrics.slack_api_errors.labels(method=method, error=str(body.get("error"))).inc()
        return False


def _method_of(url: str) -> str:
    path = url.split("?", 1)[0]
    if "/api/" in path:
        return path.rsplit("/api/", 1)[1] or "unknown"
    # response_url posts and webhooks: never label with the URL itself, it is a credential.
    return "response_url" if "/hooks/" in path or "/actions/" in path or "/commands/" in path else "other"
