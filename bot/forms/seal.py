"""The run form's private_metadata, sealed: what comes back with an action or a submission is what the bot wrote.

Slack hands a view's private_metadata back with every action and submission, and whoever sends the payload can
write anything there. The bot writes its form context (the channel, who opened the form, from where) with an
HMAC-SHA256 over it, keyed by a key derived from a secret only the bot has, and reads the context back only when
that HMAC matches and every field has the type the bot wrote: a channel or an opener changed, a field added or
missing, a JSON object where a string belongs, all fail the same way (FormTampered), before anything is used.
Nothing is stored per view, so no table and no clean-up: the key is the only state.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

from bot.forms.fields import ORIGINS, FormContext
from bot.slack.channels import is_channel_id

# Fixed, so the key is the secret's HMAC for this one purpose: the raw secret is never used as a key here.
KEY_LABEL = b"finetune-bot/run-form/private_metadata/v1"
SIG = "sig"
FIELDS = frozenset({"channel", "origin", "rerun_of", "opener"})
MAX_RUN_NAME = 128


class FormTampered(ValueError):
    """private_metadata the bot did not write (or not for this form); the message is for the log only."""


def form_key(secret: str) -> bytes:
    """The seal's key: an HMAC of the bot's secret (the signing secret) and a fixed label."""
    return hmac.new(secret.encode(), KEY_LABEL, hashlib.sha256).digest()


class FormSeal:
    """Writes a form's context as signed private_metadata, and reads it back only when the signature holds."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a form seal needs a key of at least 16 bytes")
        self._key = key

    @classmethod
    def from_secret(cls, secret: str) -> FormSeal:
        """The seal of a bot whose secret is `secret` (every replica with that secret reads the others' forms)."""
        return cls(form_key(secret))

    @classmethod
    def random(cls) -> FormSeal:
        """A seal for this process only (a bot built without a secret): forms it opened, it alone accepts."""
        return cls(secrets.token_bytes(32))

    def seal(self, ctx: FormContext) -> str:
        """The context as private_metadata: its fields and their signature, as JSON."""
        fields: dict[str, Any] = {
            "channel": ctx.channel,
            "origin": ctx.origin,
            "rerun_of": ctx.rerun_of,
            "opener": ctx.opener,
        }
        return json.dumps({**fields, SIG: self._sign(fields)})

    def open(self, metadata: object) -> FormContext:
        """The context the bot wrote; FormTampered when the signature or any field's type does not hold."""
        if not isinstance(metadata, str) or not metadata:
            raise FormTampered("no private_metadata")
        try:
            data = json.loads(metadata)
        except ValueError as exc:
            raise FormTampered("private_metadata is not JSON") from exc
        if not isinstance(data, dict) or set(data) != FIELDS | {SIG}:
            raise FormTampered("private_metadata does not hold the fields the bot writes")
        sig = data.pop(SIG)
        if not isinstance(sig, str) or not hmac.compare_digest(sig.encode(), self._sign(data).encode()):
            raise FormTampered("private_metadata signature does not match")
        # Checked under a good signature too: what the bot wrote must still be what the bot uses.
        channel, origin, rerun_of, opener = data["channel"], data["origin"], data["rerun_of"], data["opener"]
        if channel is not None and not is_channel_id(channel):
            raise FormTampered("channel is not a channel id")
        if not isinstance(origin, str) or origin not in ORIGINS:
            raise FormTampered("origin is not one the bot writes")
        if rerun_of is not None and not (isinstance(rerun_of, str) and 0 < len(rerun_of) <= MAX_RUN_NAME):
            raise FormTampered("rerun_of is not a run name")
        if not isinstance(opener, str) or not opener:
            raise FormTampered("opener is not a user id")
        return FormContext(channel=channel, origin=origin, rerun_of=rerun_of, opener=opener)

    def _sign(self, fields: dict[str, Any]) -> str:
        message = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()
