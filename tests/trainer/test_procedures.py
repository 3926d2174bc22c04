"""The evaluation procedures pref-v1, reward-v1 and gen-v1 on the tiny model: ranges, determinism, TRL's numbers."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.trainer.runs import TINY_PREFS, TINY_PROMPTS
from trainer.data import load_split
from trainer.evaluation import EvalContractError
from trainer.procedures import build_evaluator, pair_sequences

pytestmark = pytest.mark.trainer

PREF_ARGS = SimpleNamespace(beta=0.1, max_length=64, device="cpu")
GEN_ARGS = SimpleNamespace(max_completion_length=8, reward_weights=None)


def causal_lm(path: Path, perturb: int | None = None) -> Any:
    """The tiny Llama in eval mode; with `perturb`, its weights moved by seeded noise (another policy)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    if perturb is not None:
        generator = torch.Generator().manual_seed(perturb)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return model


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    """The tiny tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


@pytest.fixture(scope="module")
def pairs() -> Any:
    """Eight held-out preference pairs."""
    return load_split(str(TINY_PREFS), "main", "eval").select(range(8))


@pytest.fixture(scope="module")
def prompts() -> Any:
    """Six held-out conversational prompts with their answers."""
    return load_split(str(TINY_PROMPTS), "main", "eval").select(range(6))


def test_pref_v1_is_zero_for_the_reference_itself(tiny_model: Path, tokenizer: Any, pairs: Any) -> None:
    model = causal_lm(tiny_model)
    evaluator = build_evaluator("pref-v1", pairs, tokenizer, model, PREF_ARGS)
    assert evaluator is not None
    assert evaluator(model) == {"eval_preference_accuracy": 0.0, "eval_reward_margin": 0.0}  # ties never count


def test_pref_v1_in_range_and_deterministic(tiny_model: Path, tokenizer: Any, pairs: Any) -> None:
    evaluator = build_evaluator("pref-v1", pairs, tokenizer, causal_lm(tiny_model), PREF_ARGS)
    assert evaluator is not None
    policy = causal_lm(tiny_model, perturb=1)
    first, second = evaluator(policy), evaluator(policy)
    assert first == second
    assert 0.0 <= first["eval_preference_accuracy"] <= 1.0 and first["eval_preference_accuracy"] * 8 % 1 == 0
    assert math.isfinite(first["eval_reward_margin"]) and first["eval_reward_margin"] != 0.0


def test_pref_v1_is_trls_implicit_reward(tiny_model: Path, tokenizer: Any, pairs: Any, tmp_path: Path) -> None:
    from trl import DPOConfig, DPOTrainer

    reference, policy = causal_lm(tiny_model), causal_lm(tiny_model, perturb=2)
    evaluator = build_evaluator("pref-v1", pairs, tokenizer, reference, PREF_ARGS)
    assert evaluator is not None
    ours = evaluator(policy)
    args = DPOConfig(
        output_dir=str(tmp_path), bf16=False, gradient_checkpointing=False, report_to="none", max_length=64,
        beta=0.1, per_device_eval_batch_size=8, disable_tqdm=True,
    )  # fmt: skip
    trainer = DPOTrainer(model=policy, ref_model=reference, args=args, train_dataset=pairs, processing_class=tokenizer)
    theirs = trainer.evaluate(pairs)
    assert ours["eval_reward_margin"] == pytest.approx(theirs["eval_rewards/margins"], rel=1e-4, abs=1e-5)
    assert ours["eval_preference_accuracy"] == pytest.approx(theirs["eval_rewards/accuracies"])


def test_pref_v1_scores_the_completion_with_eos_after_the_prompt(tokenizer: Any, pairs: Any) -> None:
    (chosen, start), (rejected, start_again) = pair_sequences(tokenizer, pairs[0], max_length=None)
    assert start == start_again
    assert tokenizer.decode(chosen[:start]) == pairs[0]["prompt"]
    assert tokenizer.decode(chosen[start:]) == pairs[0]["chosen"] + tokenizer.eos_token
    assert tokenizer.decode(rejected[start:]) == pairs[0]["rejected"] + tokenizer.eos_token
    (cut, _), _ = pair_sequences(tokenizer, pairs[0], max_length=start + 2)
    assert cut == chosen[: start + 2]


def test_reward_v1_in_range_and_deterministic(tiny_model: Path, tokenizer: Any, pairs: Any) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model, num_labels=1).eval()
    model.config.pad_token_id = tokenizer.pad_token_id
    evaluator = build_evaluator("reward-v1", pairs, tokenizer, model, PREF_ARGS)
    assert evaluator is not None
    first, second = evaluator(model), evaluator(model)
    assert first == second
    assert 0.0 <= first["eval_pairwise_accuracy"] <= 1.0
    assert math.isfinite(first["eval_reward_margin"])
    ties = pairs.map(lambda row: {"rejected": row["chosen"]})
    tied = build_evaluator("reward-v1", ties, tokenizer, model, PREF_ARGS)
    assert tied is not None and tied(model) == {"eval_pairwise_accuracy": 0.0, "eval_reward_margin": 0.0}


def test_gen_v1_in_range_and_deterministic(tiny_model: Path, tokenizer: Any, prompts: Any) -> None:
    names = ("format", "length", "exact-match")
    evaluator = build_evaluator("gen-v1", prompts, tokenizer, causal_lm(tiny_model), GEN_ARGS, names)
    assert evaluator is not None
    policy = causal_lm(tiny_model, perturb=3)
    first, second = evaluator(policy), evaluator(policy)
    assert first == second
    assert set(first) == {"eval_mean_reward", "eval_reward_format", "eval_reward_length", "eval_reward_exact_match"}
    assert all(0.0 <= first[f"eval_reward_{n}"] <= 1.0 for n in ("format", "length", "exact_match"))
    parts = first["eval_reward_format"] + first["eval_reward_length"] + first["eval_reward_exact_match"]
    assert first["eval_mean_reward"] == pytest.approx(parts)


def test_gen_v1_generates_greedily_within_the_limit(tiny_model: Path, tokenizer: Any, prompts: Any) -> None:
    from trainer.procedures import GenerationEvaluator

    rows = [dict(row) for row in prompts]
    standard = [{"prompt": f"Question: {row['prompt'][0]['content']} Answer:", "answer": row["answer"]} for row in rows]
    policy = causal_lm(tiny_model, perturb=3)
    chat = GenerationEvaluator(rows, tokenizer, 8, ["length"], [1.0])
    text = GenerationEvaluator(standard, tokenizer, 8, ["length"], [1.0])
    assert all(isinstance(c, list) and c[0]["role"] == "assistant" for c in chat.completions(policy))
    assert all(isinstance(c, str) for c in text.completions(policy))
    ids = chat.generate(policy)
    assert all(0 < len(completion) <= 8 for completion in ids)
    assert all(tokenizer.eos_token_id not in completion[:-1] for completion in ids)
    for index, completion in enumerate(ids):  # a batch's left padding changes no prompt's completion
        assert GenerationEvaluator(rows[index : index + 1], tokenizer, 8, [], []).generate(policy) == [completion]
    shorter = GenerationEvaluator(rows, tokenizer, 3, [], []).generate(policy)
    assert shorter == [completion[:3] for completion in ids]  # greedy: the first tokens do not depend on the limit


def test_gen_v1_weighs_the_rewards(tiny_model: Path, tokenizer: Any, prompts: Any) -> None:
    args = SimpleNamespace(max_completion_length=8, reward_weights=[2.0, 0.0])
    evaluator = build_evaluator("gen-v1", prompts, tokenizer, causal_lm(tiny_model), args, ("length", "format"))
    assert evaluator is not None
    metrics = evaluator(causal_lm(tiny_model, perturb=3))
    assert metrics["eval_mean_reward"] == pytest.approx(2.0 * metrics["eval_reward_length"])


@pytest.mark.parametrize(
    ("procedure", "rows", "message"),
    [
        ("pref-v1", [{"prompt": "p", "chosen": "c"}], r"needs eval columns .* lacks \['rejected'\]"),
        ("reward-v1", [{"text": "t"}], r"lacks \['chosen', 'rejected'\]"),
        ("gen-v1", [{"messages": []}], r"lacks \['prompt'\]"),
        ("gen-v1", [], "has no rows"),
    ],
    ids=["pref-without-rejected", "reward-without-pairs", "gen-without-prompt", "empty"],
)
def test_an_eval_split_without_the_procedures_columns_is_refused(
    procedure: str, rows: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(EvalContractError, match=message):
        build_evaluator(procedure, rows, None, None, PREF_ARGS)


def test_v1_keeps_the_trainers_own_loop() -> None:
    assert build_evaluator("v1", [], None, None, PREF_ARGS) is None
