"""Redaction: every secret shape a training log can leak is removed; ordinary text stays."""

from __future__ import annotations

import pytest

from bot.redact import REDACTED, cap_tail, redact

LEAKS = [
    ("slack-bot", "token xoxb-1234567890-abcdefABCDEF used", "xoxb-1234567890"),
    ("slack-user", "xoxp-1111-2222-3333-abcd", "xoxp-1111"),
    ("slack-app", "SLACK_APP_TOKEN=xapp-1-A01-123-abcdef", "xapp-1-A01"),
    ("hf", "login with hf_AbCdEfGhIjKlMnOpQrStUv", "hf_AbCdEf"),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdef"),
    ("openai", "OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234", "sk-proj-abcdef"),
    ("aws", "key AKIAIOSFODNN7EXAMPLE in env", "AKIAIOSFODNN7EXAMPLE"),
    ("url-password", "postgresql://bot:s3cr3t-pw@db:5432/x", "s3cr3t-pw"),
    ("git-remote", "https://oauth2:glpat-xyz123456@gitlab.example.com/repo.git", "glpat-xyz123456"),
    ("bearer", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
    ("kv-password", "password=hunter22 next", "hunter22"),
    ("kv-quoted", "db_password: 'p@ss w'", "p@ss"),
    ("kv-token", "WANDB_API_KEY=0123456789abcdef0123", "0123456789abcdef0123"),
    ("pem", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
]


@pytest.mark.parametrize(("text", "secret"), [(t, s) for _, t, s in LEAKS], ids=[i for i, _, _ in LEAKS])
def test_secrets_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    ["step 10 loss=1.234 lr=0.001", "Saving checkpoint to outputs/checkpoint-50", "token count 1234 tokens/s 55"],
    ids=["metrics", "paths", "token-words"],
)
def test_ordinary_lines_are_kept(text: str) -> None:
    assert redact(text) == text


def test_given_secret_values_are_redacted_anywhere() -> None:
    assert redact("the value is abcdef-secret-value!", extra_secrets=["abcdef-secret-value"]) == (
        f"the value is {REDACTED}!"
    )


def test_cap_tail_keeps_the_end_and_counts_the_rest() -> None:
    lines = [f"line {i:04d} " + "x" * 90 for i in range(200)]
    tail, left = cap_tail(lines, max_bytes=3500)
    assert len(tail.encode()) <= 3500
    assert tail.endswith(lines[-1])
    assert left == 200 - len(tail.splitlines())
    assert cap_tail(["short"], max_bytes=3500) == ("short", 0)
    huge, dropped = cap_tail(["y" * 10_000], max_bytes=100)
    assert huge == "y" * 100 and dropped == 0
