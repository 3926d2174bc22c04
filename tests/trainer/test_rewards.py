"""The reward-function registry: each function on standard and conversational completions, name parsing."""

from __future__ import annotations

from typing import Any

import pytest

from trainer.rewards import (
    LENGTH_TARGET_WORDS,
    REGISTRY,
    RewardError,
    check_columns,
    completion_text,
    exact_match_reward,
    format_reward,
    length_reward,
    metric_name,
    parse_reward_names,
    select,
)


def chat(text: str) -> list[dict[str, str]]:
    """A conversational completion as TRL hands it to reward functions."""
    return [{"role": "assistant", "content": text}]


def both_forms(texts: list[str]) -> list[list[Any]]:
    """The same completions as standard text and as conversational messages."""
    return [list(texts), [chat(text) for text in texts]]


@pytest.mark.parametrize("form", [0, 1], ids=["standard", "conversational"])
def test_format_rewards_one_line_ending_with_a_full_stop(form: int) -> None:
    texts = [" The capital of Peru is Lima.", "3 plus 4 is 7.  \n", "LIMA!", "two\nlines.", "", "."]
    assert format_reward(both_forms(texts)[form]) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("form", [0, 1], ids=["standard", "conversational"])
def test_length_rewards_closeness_to_the_target(form: int) -> None:
    target = LENGTH_TARGET_WORDS
    texts = [" ".join(["w"] * n) for n in (target, target - 3, target + 3, 0, 2 * target, 3 * target)]
    assert length_reward(both_forms(texts)[form]) == [1.0, 0.5, 0.5, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("form", [0, 1], ids=["standard", "conversational"])
def test_exact_match_compares_the_stripped_completion_with_the_answer(form: int) -> None:
    texts = [" 3 plus 4 is 7.\n", "3 plus 4 is 8.", "3 PLUS 4 IS 7."]
    answers = ["3 plus 4 is 7.", " 3 plus 4 is 8. ", "3 plus 4 is 7."]
    assert exact_match_reward(both_forms(texts)[form], answer=answers, prompts=["q"] * 3) == [1.0, 1.0, 0.0]


def test_exact_match_without_the_answer_column_names_it() -> None:
    with pytest.raises(RewardError, match="column 'answer'"):
        exact_match_reward(["x"], prompts=["q"])
    with pytest.raises(RewardError, match=r"row 1 .* column 'answer'"):
        exact_match_reward(["x", "y"], answer=["x", None])


def test_every_function_takes_trls_keyword_arguments_and_returns_one_float_per_completion() -> None:
    completions = both_forms(["A sentence.", "B"])[1]
    extra = {"prompts": [[{"role": "user", "content": "q"}]] * 2, "completion_ids": [[1], [2]], "trainer_state": None}
    for name, function in REGISTRY.items():
        scores = function(completions=completions, answer=["A sentence.", "b"], **extra)
        assert len(scores) == 2 and all(isinstance(s, float) and 0.0 <= s <= 1.0 for s in scores), name


def test_completion_text_reads_text_parts_of_multimodal_messages() -> None:
    message = {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "image"}, {"type": "text"}]}
    assert completion_text([message, {"role": "assistant", "content": "B"}]) == "AB"


def test_names_parse_in_order() -> None:
    assert parse_reward_names(" format, exact-match ,length") == ("format", "exact-match", "length")
    assert select(["length", "format"]) == [length_reward, format_reward]
    assert metric_name("exact-match") == "eval_reward_exact_match"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("format,bleu", r"unknown reward functions \['bleu'\]; known: format, length, exact-match"),
        (" , ", "no reward functions given"),
        ("format,format", "repeat"),
    ],
    ids=["unknown", "empty", "repeated"],
)
def test_bad_names_are_refused(text: str, message: str) -> None:
    with pytest.raises(RewardError, match=message):
        parse_reward_names(text)


def test_a_split_without_a_column_a_function_reads_is_refused() -> None:
    check_columns(["format", "length"], ["prompt"], "train")
    with pytest.raises(RewardError, match="exact-match needs the column 'answer', which the eval split lacks"):
        check_columns(["format", "exact-match"], ["prompt"], "eval")
