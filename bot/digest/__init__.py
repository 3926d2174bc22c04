"""Digests per channel: the schedule (`/finetune digest …`), the stored jobs, and the digest's content."""

from bot.digest.compose import DigestApproval, DigestData, DigestRun, compose_digest, digest_fallback_text
from bot.digest.schedule import cron_for
from bot.digest.service import DigestRuntime, to_digest_run

__all__ = [
    "DigestApproval",
    "DigestData",
    "DigestRun",
    "DigestRuntime",
    "compose_digest",
    "cron_for",
    "digest_fallback_text",
    "to_digest_run",
]
