"""The scheduled digest job. Digest jobs live in APScheduler's persistent store, which names their function.

Jobs stored before the digest capability moved to `bot/digest/` name `handlers.digests:digest_job`; this
name keeps resolving so that those stored jobs still load. New jobs name `bot.digest.jobs:digest_job`.
"""

from bot.digest.jobs import digest_job

__all__ = ["digest_job"]
