"""TRL's dataset formats told from columns and a first row, and which trainer takes which."""

from __future__ import annotations

import pytest

from bot.catalog.formats import TRAINER_FORMATS, DataFormat, detect_format, mismatch, trainer_takes

CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"text": "a b c"}, DataFormat("language_modeling")),
        ({"messages": CHAT}, DataFormat("language_modeling", conversational=True)),
        ({"prompt": "Q:"}, DataFormat("prompt_only")),
        ({"prompt": CHAT[:1], "answer": "4"}, DataFormat("prompt_only", conversational=True)),
        ({"prompt": "Q:", "completion": " A."}, DataFormat("prompt_completion")),
        ({"prompt": "Q:", "chosen": " A.", "rejected": " B!"}, DataFormat("preference")),
        ({"prompt": CHAT[:1], "chosen": CHAT[1:], "rejected": CHAT[1:]}, DataFormat("preference", True)),
        ({"chosen": "Q: A.", "rejected": "Q: B!"}, DataFormat("implicit_preference")),
        ({"prompt": "Q:", "completion": " A.", "label": True}, DataFormat("unpaired_preference")),
        ({"question": "Q:", "reply": "A."}, None),
    ],
)
def test_a_format_is_told_from_the_columns_and_the_first_row(row: dict[str, object], expected: object) -> None:
    assert detect_format(row, row) == expected


def test_extra_columns_never_decide_the_format() -> None:
    assert detect_format(["prompt", "answer", "source"]) == DataFormat("prompt_only")
    assert detect_format(["text", "id"]) == DataFormat("language_modeling")


def test_each_trainer_takes_the_formats_trl_documents() -> None:
    assert trainer_takes("sft", DataFormat("language_modeling", conversational=True))
    assert trainer_takes("sft", DataFormat("prompt_completion"))
    assert trainer_takes("dpo", DataFormat("preference"))
    assert not trainer_takes("dpo", DataFormat("implicit_preference"))  # DPO wants the prompt apart
    assert trainer_takes("reward", DataFormat("implicit_preference"))
    assert trainer_takes("kto", DataFormat("unpaired_preference"))
    assert trainer_takes("grpo", DataFormat("prompt_only", conversational=True))
    assert not trainer_takes("rloo", DataFormat("prompt_completion"))
    assert set(TRAINER_FORMATS) == {"sft", "dpo", "grpo", "kto", "reward", "rloo"}


def test_a_mismatch_names_the_columns_needed_and_those_the_dataset_has() -> None:
    text = mismatch("dpo", "tiny-chat", DataFormat("language_modeling", True), ["messages"])
    assert text == (
        "DPO needs preference (prompt, chosen, rejected); dataset tiny-chat is conversational "
        "language_modeling (messages) with columns messages"
    )
    assert "prompt_only (prompt)" in mismatch("grpo", "tiny-prefs", DataFormat("preference"), ["prompt", "chosen"])
