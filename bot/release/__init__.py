"""The release path: serving checks, approval-gated stage promotion, rollback and the signed release webhook."""

from bot.release.service import ReleaseService
from bot.release.webhook import ReleaseWebhook, sign, verify

__all__ = ["ReleaseService", "ReleaseWebhook", "sign", "verify"]
