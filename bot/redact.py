"""Secrets out of anything the bot posts or logs: tokens, keys, passwords in URLs."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Slack tokens: bot, user, app-level, config, refresh.
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{6,}"), REDACTED),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{6,}"), REDACTED),
    # Hugging Face, GitHub, OpenAI-style, AWS access keys, Google API keys.
    (re.compile(r"\bhf_[A-Za-z0-9]{8,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED),
    # user:password@ in any URL (database URLs, git remotes, proxies).
    (
        re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@"),
        r"\g<scheme>\g<user>:" + REDACTED + "@",
    ),
    # Authorization headers and key=value / key: value secrets.
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:bearer|token|basic)?\s*)[^\s'\"]+"), r"\1" + REDACTED),
    (
        re.compile(
            r"(?i)\b((?:[a-z0-9_]*_)?(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)"
            r"[a-z0-9_]*\s*[=:]\s*)(?:'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"]+)"
        ),
        r"\1" + REDACTED,
    ),
    # PEM private keys.
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), REDACTED),
]


def redact(text: str, *, extra_secrets: list[str] | tuple[str, ...] = ()) -> str:
    """`text` with every known secret shape and every given secret value replaced by [REDACTED]."""
    for secret in extra_secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def cap_tail(lines: list[str], *, max_bytes: int = 3500) -> tuple[str, int]:
    """The last lines that fit in `max_bytes` (UTF-8) and how many earlier lines were left out."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        cost = len(line.encode()) + 1
        if size + cost > max_bytes:
            break
        kept.append(line)
        size += cost
    if not kept and lines:  # one huge line: keep its end
        tail = lines[-1].encode()[-max_bytes:].decode(errors="ignore")
        return tail, len(lines) - 1
    kept.reverse()
    return "\n".join(kept), len(lines) - len(kept)
