"""Approval-gated model registration: requests, approval by reaction, registration in Polyaxon, and trace."""

from bot.registry.registration import RECORDED_REACTION, REGISTERED_EVENT
from bot.registry.render import next_version, polyaxon_version_name, render_request
from bot.registry.service import RegistrationService

__all__ = [
    "RECORDED_REACTION",
    "REGISTERED_EVENT",
    "RegistrationService",
    "next_version",
    "polyaxon_version_name",
    "render_request",
]
