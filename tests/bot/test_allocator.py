"""`serve`'s allocator settings: arenas capped, thresholds fixed, glibc's thread cache off (bot/allocator.py)."""

from __future__ import annotations

from typing import Any

from bot.allocator import (
    ARENAS,
    M_ARENA_MAX,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    TCACHE_TUNABLE,
    allocator_environment,
    tune_allocator,
)
from bot.cli import _started_as_cli


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.answer = answer
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: Any, value: Any) -> int:
        self.calls.append((param.value, value.value))
        return self.answer


def test_tuning_caps_the_arenas_and_fixes_both_thresholds() -> None:
    libc = FakeLibc()
    assert tune_allocator(libc) is True
    settings = dict(libc.calls)
    assert settings[M_ARENA_MAX] == ARENAS
    assert settings[M_MMAP_THRESHOLD] > 0 and settings[M_TRIM_THRESHOLD] > 0  # fixed: glibc no longer moves them


def test_tuning_says_when_glibc_refused_a_value() -> None:
    libc = FakeLibc(answer=0)
    assert tune_allocator(libc) is False
    assert len(libc.calls) == 3  # every value is still tried


def test_the_environment_turns_the_thread_cache_off_and_keeps_everything_else() -> None:
    env = allocator_environment({"PATH": "/bin", "GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}, glibc=True)
    assert env is not None
    assert env["PATH"] == "/bin"
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=4:{TCACHE_TUNABLE}=0"
    assert allocator_environment({}, glibc=True) == {"GLIBC_TUNABLES": f"{TCACHE_TUNABLE}=0"}


def test_a_process_started_with_it_is_not_started_again() -> None:
    env = allocator_environment({}, glibc=True)
    assert env is not None
    assert allocator_environment(env, glibc=True) is None  # serve re-executes itself at most once
    # An operator's own size for the cache is theirs.
    assert allocator_environment({"GLIBC_TUNABLES": f"{TCACHE_TUNABLE}=3"}, glibc=True) is None


def test_nothing_to_do_without_glibc() -> None:
    assert allocator_environment({}, glibc=False) is None


def test_only_the_cli_process_itself_replaces_itself() -> None:
    assert _started_as_cli(["/venv/bin/python", "/venv/bin/finetune-bot", "serve"])
    assert _started_as_cli(["python", "-m", "bot.cli", "serve", "--port", "3000"])
    # A test running the CLI in-process (CliRunner) must never be replaced.
    assert not _started_as_cli(["python", "-m", "pytest", "tests/bot/test_cli.py"])
    assert not _started_as_cli(["python"])
