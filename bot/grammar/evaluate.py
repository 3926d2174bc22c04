"""`eval RUN|MODEL:VERSION [suite=NAME]`: evaluate a finished run's model, or a registered version, on a suite."""

from __future__ import annotations

import re
from typing import Literal

from bot.grammar.lexing import CommandError, _Command, _flags, _key_values, _no_extra, _only_keys, _run_ref
from bot.grammar.registration import MODEL_RE, VERSION_RE

USAGE = "eval RUN|MODEL:VERSION [suite=NAME]"
SUITE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class EvalCommand(_Command):
    """`eval RUN [suite=NAME]` or `eval MODEL:VERSION [suite=NAME]`: exactly one of `run` and `model`+`version`."""

    name: Literal["eval"] = "eval"
    run: str | None = None
    model: str | None = None
    version: str | None = None
    suite: str | None = None

    @property
    def subject(self) -> str:
        """What is evaluated, as typed."""
        return self.run if self.run is not None else f"{self.model}:{self.version}"


def _parse_eval(tokens: list[str]) -> EvalCommand:
    positional, pairs = _key_values(tokens, "eval")
    _only_keys(pairs, ("suite",), "eval")
    words, _ = _flags(positional, (), "eval")
    if not words:
        raise CommandError(f"`eval` needs a RUN or a registered MODEL:VERSION; usage: {USAGE}")
    _no_extra(words[1:], "eval " + words[0], USAGE)
    suite = pairs.get("suite")
    if suite is not None:
        suite = suite.lower()
        if not SUITE_RE.match(suite):
            raise CommandError(f"suite={pairs['suite']!r} is not a suite name (letters, digits, . _ -); usage: {USAGE}")
    subject = words[0]
    if ":" in subject:
        model, _, version = subject.partition(":")
        if not MODEL_RE.match(model) or not VERSION_RE.match(version):
            raise CommandError(f"{subject!r} is not MODEL:VERSION (`tiny-chat:v1`, say); usage: {USAGE}")
        return EvalCommand(model=model, version=version, suite=suite)
    return EvalCommand(run=_run_ref(subject), suite=suite)
