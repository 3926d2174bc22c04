"""The serving check's pure parts: the prompt set, its expectations, latency percentiles and content digests.

Standard library only (plus `trainer.digests`), so the bot's side of the contract can be read here without torch.

A prompt set is JSONL, one prompt a line:

    {"id": "capital", "messages": [{"role": "user", "content": "..."}],
     "expect": {"non_empty": true, "stops": true, "max_tokens": 48, "regex": "Cairo", "exact": "..."}}

Every key of `expect` is optional. `non_empty`: the output has non-blank text. `stops`: the model ended its
turn by itself (finish_reason "stop"). `max_tokens`: at most that many new tokens. `regex`: `re.search`
finds the pattern in the output. `exact`: the stripped output equals the stripped expected text. A check
given as `false` (`"stops": false`) is not run.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.digests import file_entries, folder_digest

EXPECT_KEYS = ("non_empty", "stops", "max_tokens", "regex", "exact")
EXCERPT_CHARS = 120


class ServingError(Exception):
    """The check could not run (bad prompt set, digest mismatch, missing checkpoint, ...); the report says why."""


@dataclass(frozen=True)
class Prompt:
    """One request of the prompt set."""

    id: str
    messages: list[dict[str, str]]
    expect: dict[str, Any] = field(default_factory=dict)


def sha256_bytes(data: bytes) -> str:
    """`sha256:<hex>` of some bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def same_digest(expected: str, actual: str) -> bool:
    """Whether `expected` (`sha256:<hex>` or bare hex, any case) names `actual`."""
    return expected.strip().lower().removeprefix("sha256:") == actual.removeprefix("sha256:")


def checkpoint_digest(folder: Path) -> str:
    """The model folder's content digest, as its `finetune_files.json` manifest records it (`trainer.digests`).

    One `path<TAB>size<TAB>sha256` line per file, sorted by relative path; the manifest itself and hidden
    files are left out, so it equals the `model_digest` output of the run that saved the folder.
    """
    return folder_digest(file_entries(folder))


def _check_expect(where: str, expect: Any) -> dict[str, Any]:
    if not isinstance(expect, dict):
        raise ServingError(f"{where}: expect must be an object")
    unknown = sorted(set(expect) - set(EXPECT_KEYS))
    if unknown:
        raise ServingError(f"{where}: unknown expectation {', '.join(unknown)} (known: {', '.join(EXPECT_KEYS)})")
    for key in ("non_empty", "stops"):
        if key in expect and not isinstance(expect[key], bool):
            raise ServingError(f"{where}: expect.{key} must be true or false")
    bound = expect.get("max_tokens")
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
        raise ServingError(f"{where}: expect.max_tokens must be a non-negative integer")
    for key in ("regex", "exact"):
        if key in expect and not isinstance(expect[key], str):
            raise ServingError(f"{where}: expect.{key} must be a string")
    if "regex" in expect:
        try:
            re.compile(expect["regex"])
        except re.error as exc:
            raise ServingError(f"{where}: expect.regex does not compile: {exc}") from exc
    return dict(expect)


def _check_messages(where: str, messages: Any) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise ServingError(f"{where}: messages must be a non-empty list")
    for index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or not isinstance(message.get("content"), str)
        ):
            raise ServingError(f"{where}: messages[{index}] needs a string role and content")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def parse_prompts(text: str, source: str) -> list[Prompt]:
    """Parse a JSONL prompt set (blank lines skipped); raise ServingError naming the line when one is bad."""
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ServingError(f"{where}: not JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise ServingError(f"{where}: expected a JSON object")
        prompt_id = row.get("id")
        if not isinstance(prompt_id, str) or not prompt_id:
            raise ServingError(f"{where}: id must be a non-empty string")
        if prompt_id in seen:
            raise ServingError(f"{where}: id {prompt_id!r} is used twice")
        seen.add(prompt_id)
        messages = _check_messages(where, row.get("messages"))
        prompts.append(Prompt(prompt_id, messages, _check_expect(where, row.get("expect", {}))))
    if not prompts:
        raise ServingError(f"{source}: no prompts")
    return prompts


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The output quoted for a failure line: repr-quoted, cut at `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def run_checks(expect: dict[str, Any], output: str, new_tokens: int, finish_reason: str) -> list[dict[str, Any]]:
    """Judge one generation against its expectations: `[{"name", "passed", "evidence"}]` in EXPECT_KEYS order."""
    checks: list[dict[str, Any]] = []

    def add(name: str, passed: bool, evidence: str) -> None:
        checks.append({"name": name, "passed": passed, "evidence": evidence})

    if expect.get("non_empty"):
        add("non_empty", bool(output.strip()), f"{len(output.strip())} non-blank characters")
    if expect.get("stops"):
        add("stops", finish_reason == "stop", f"finish_reason {finish_reason}")
    if expect.get("max_tokens") is not None:
        bound = int(expect["max_tokens"])
        add("max_tokens", new_tokens <= bound, f"{new_tokens} new tokens, at most {bound}")
    if "regex" in expect:
        match = re.search(expect["regex"], output)
        found = f"matched {match.group(0)!r}" if match else f"no match of {expect['regex']!r}"
        add("regex", match is not None, found)
    if "exact" in expect:
        wanted = expect["exact"].strip()
        same = output.strip() == wanted
        add("exact", same, "equal" if same else f"expected {excerpt(wanted)}")
    return checks


def failure_line(prompt_id: str, checks: Sequence[dict[str, Any]], output: str) -> str | None:
    """`<id>: <failed checks with their evidence>; output <excerpt>`, or None when every check passed."""
    failed = [f"{c['name']} failed ({c['evidence']})" for c in checks if not c["passed"]]
    if not failed:
        return None
    return f"{prompt_id}: {'; '.join(failed)}; output {excerpt(output)}"


def nearest_rank(values: Sequence[float], percent: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `percent`% of the values at or below it."""
    if not values:
        raise ValueError("no values")
    if not 0 < percent <= 100:
        raise ValueError(f"percent {percent} is not in (0, 100]")
    ordered = sorted(values)
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float | None]:
    """`{"p50", "p95", "max"}` of the per-request latencies (nearest rank), in ms; nulls when there are none."""
    if not latencies_ms:
        return {"p50": None, "p95": None, "max": None}
    return {
        "p50": round(nearest_rank(latencies_ms, 50), 3),
        "p95": round(nearest_rank(latencies_ms, 95), 3),
        "max": round(max(latencies_ms), 3),
    }
