"""The front door: every Slack delivery is screened (size, content type, signature, shape) before Bolt sees it."""

from bot.frontdoor.door import ADMITTED, Answer, FrontDoor
from bot.frontdoor.payloads import parse_http_body, parse_socket_payload
from bot.frontdoor.screen import MAX_BODY_BYTES, check_length, screen_http
from bot.frontdoor.signature import check_signature
from bot.frontdoor.verdict import Delivery, Refused

__all__ = [
    "ADMITTED",
    "MAX_BODY_BYTES",
    "Answer",
    "Delivery",
    "FrontDoor",
    "Refused",
    "check_length",
    "check_signature",
    "parse_http_body",
    "parse_socket_payload",
    "screen_http",
]
