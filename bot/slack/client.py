"""Slack HTTP clients with the bot's retry policy: connection errors and 429 (honouring Retry-After)."""

from __future__ import annotations

from typing import Any

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.webhook import WebhookClient

from bot.metrics import BotMetrics
from bot.settings import Settings

CONNECTION_RETRIES = 3
RATE_LIMIT_RETRIES = 8  # Slack's Retry-After is seconds; eight waits ride out a burst without losing a call.


class SlackReplyError(Exception):
    """A response_url post failed after retries (the URL itself is never part of the message)."""


def slack_retry_handlers(metrics: BotMetrics) -> list[RetryHandler]:
    """The observer (counts failures) first, then connection-error and rate-limit retries."""
    return [
        metrics.slack_call_observer(),
        ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
        RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
    ]


def build_web_client(settings: Settings, metrics: BotMetrics, *, timeout_s: int = 30) -> WebClient:
    """The bot's WebClient, pointed at `SLACK_API_BASE_URL`."""
    token = settings.slack.bot_token.get_secret_value() if settings.slack.bot_token else None
    return WebClient(
        token=token,
        base_url=settings.slack.api_base_url,
        timeout=timeout_s,
        retry_handlers=slack_retry_handlers(metrics),
    )


def without_rate_limit_retries(client: WebClient) -> WebClient:
    """The same client for calls that must not wait out a 429 (card edits: their newest state goes later instead)."""
    return WebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        retry_handlers=[h for h in client.retry_handlers if not isinstance(h, RateLimitErrorRetryHandler)],
    )


def post_to_response_url(response_url: str, message: dict[str, Any], metrics: BotMetrics) -> None:
    """POST a message to a `response_url` with the same retry policy; raise SlackReplyError on failure."""
    client = WebhookClient(url=response_url, timeout=30, retry_handlers=slack_retry_handlers(metrics))
    resp = client.send_dict(message)
    if resp.status_code != 200:
        raise SlackReplyError(f"response_url post failed: HTTP {resp.status_code} {resp.body[:200]}")
