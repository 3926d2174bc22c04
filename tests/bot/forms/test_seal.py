"""The run form's sealed private_metadata, without Slack: read back only as the bot wrote it, types included."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from bot.forms.fields import FormContext
from bot.forms.seal import FormSeal, FormTampered, form_key

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CTX = FormContext(channel="C0TRAIN01", origin="rerun", rerun_of="sft-tiny-0123456789", opener="U0ALICE01")


def signed(fields: dict[str, Any], secret: str = SECRET) -> str:
    """private_metadata signed with the bot's own key: what only the bot could write."""
    message = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return json.dumps({**fields, "sig": hmac.new(form_key(secret), message, hashlib.sha256).hexdigest()})


def test_a_sealed_context_reads_back_as_written_by_any_replica_with_the_secret() -> None:
    text = FormSeal.from_secret(SECRET).seal(CTX)
    assert FormSeal.from_secret(SECRET).open(text) == CTX
    assert json.loads(text)["channel"] == "C0TRAIN01"  # readable: the seal signs, it does not hide
    home = FormContext(channel=None, origin="home", opener="U0ALICE01")
    assert FormSeal.from_secret(SECRET).open(FormSeal.from_secret(SECRET).seal(home)) == home


def test_the_key_is_derived_from_the_secret_never_the_secret_itself() -> None:
    key = form_key(SECRET)
    assert len(key) == 32 and key != SECRET.encode() and SECRET.encode() not in key
    assert form_key(SECRET) == key and form_key(SECRET + "x") != key
    with pytest.raises(FormTampered, match="signature"):
        FormSeal.from_secret("another-secret-of-another-bot!!").open(FormSeal.from_secret(SECRET).seal(CTX))
    with pytest.raises(FormTampered, match="signature"):
        FormSeal.random().open(FormSeal.random().seal(CTX))  # each process's own key, without a secret


@pytest.mark.parametrize(
    ("field", "value"),
    [("channel", "C0SECRET1"), ("channel", None), ("opener", "U0BOB0001"), ("origin", "home"), ("rerun_of", None)],
    ids=["channel", "channel-removed", "opener", "origin", "rerun-of"],
)
def test_any_field_changed_breaks_the_seal(field: str, value: object) -> None:
    data = json.loads(FormSeal.from_secret(SECRET).seal(CTX))
    data[field] = value
    with pytest.raises(FormTampered, match="signature does not match"):
        FormSeal.from_secret(SECRET).open(json.dumps(data))


@pytest.mark.parametrize(
    "metadata",
    [None, "", "{", "[]", "3", json.dumps({"channel": "C0TRAIN01", "origin": "command", "rerun_of": None}), {"a": 1}],
    ids=["none", "empty", "not-json", "a-list", "a-number", "unsigned", "not-a-string"],
)
def test_what_the_bot_did_not_write_is_refused(metadata: object) -> None:
    with pytest.raises(FormTampered):
        FormSeal.from_secret(SECRET).open(metadata)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"channel": {"id": "C0TRAIN01"}, "origin": "command", "rerun_of": None, "opener": "U1"}, "channel"),
        ({"channel": "#general", "origin": "command", "rerun_of": None, "opener": "U1"}, "channel"),
        ({"channel": "C0TRAIN01\n", "origin": "command", "rerun_of": None, "opener": "U1"}, "channel"),
        ({"channel": None, "origin": {"o": 1}, "rerun_of": None, "opener": "U1"}, "origin"),
        ({"channel": None, "origin": "webhook", "rerun_of": None, "opener": "U1"}, "origin"),
        ({"channel": None, "origin": "home", "rerun_of": ["r"], "opener": "U1"}, "rerun_of"),
        ({"channel": None, "origin": "home", "rerun_of": None, "opener": ""}, "opener"),
        ({"channel": None, "origin": "home", "rerun_of": None, "opener": 7}, "opener"),
        ({"channel": None, "origin": "home", "rerun_of": None}, "fields"),
        ({"channel": None, "origin": "home", "rerun_of": None, "opener": "U1", "more": 1}, "fields"),
    ],
    ids=["channel-object", "channel-name", "channel-newline", "origin-object", "origin-unknown", "rerun-list",
         "opener-empty", "opener-number", "field-missing", "field-added"],
)  # fmt: skip
def test_types_are_checked_even_under_a_good_signature(fields: dict[str, Any], why: str) -> None:
    with pytest.raises(FormTampered, match=why):
        FormSeal.from_secret(SECRET).open(signed(fields))


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        FormSeal(b"short")
