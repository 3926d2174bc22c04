"""`promote` and `rollback`: what they accept, and the specific reply for what they do not."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, PromoteCommand, RollbackCommand, parse_command


def test_promote_and_rollback_parse() -> None:
    assert parse_command("promote tiny-chat:v1 stage=staging") == PromoteCommand(
        model="tiny-chat", version="v1", stage="staging"
    )
    assert parse_command("/finetune promote tiny-chat:v2 stage=Production") == PromoteCommand(
        model="tiny-chat", version="v2", stage="production"
    )
    assert parse_command("rollback tiny-chat stage=production") == RollbackCommand(
        model="tiny-chat", stage="production"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("promote", "needs MODEL:VERSION"),
        ("promote tiny-chat stage=staging", "needs the version too: `tiny-chat:v1`"),
        ("promote tiny-chat:v1", "needs stage=staging|production"),
        ("promote tiny-chat:v1 stage=prod", "did you mean production"),
        ("promote tiny-chat:v1 stage=testing", "not a release stage"),
        ("promote tiny-chat:v1 stage=staging extra", "unexpected 'extra'"),
        ("promote tiny-chat:v1 stage=staging force=1", "unknown option 'force'"),
        ("promote tiny-chat:v1! stage=staging", "not a version"),
        ("rollback tiny-chat:v1 stage=production", "takes the model, not a version"),
        ("rollback tiny-chat", "needs stage="),
        ("rollback", "needs a MODEL"),
    ],
)
def test_bad_release_commands_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(text)
    assert needle in err.value.message, err.value.message
