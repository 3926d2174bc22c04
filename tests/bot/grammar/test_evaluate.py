"""`eval RUN|MODEL:VERSION [suite=NAME]`."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, EvalCommand, parse_command


def test_eval_takes_a_run_or_a_registered_version_and_an_optional_suite() -> None:
    assert parse_command("eval sft-tiny-1a2b3c4d") == EvalCommand(run="sft-tiny-1a2b3c4d")
    assert parse_command("/finetune eval tiny-chat:v2 suite=Tiny") == EvalCommand(
        model="tiny-chat", version="v2", suite="tiny"
    )
    assert parse_command("eval tiny-chat:v2").subject == "tiny-chat:v2"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("eval", "`eval` needs a RUN or a registered MODEL:VERSION"),
        ("eval a b", "unexpected 'b' after `eval a`"),
        ("eval run1 suite=a/b", "suite='a/b' is not a suite name"),
        ("eval run1 tasks=x", "tasks"),
        ("eval tiny-chat: ", "is not MODEL:VERSION"),
        ("eval :v1", "is not MODEL:VERSION"),
    ],
)
def test_eval_refuses_what_it_cannot_take(text: str, says: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert says in str(info.value)
