"""The evaluation procedures `pref-v1`, `reward-v1` and `gen-v1` (defined in `trainer.evaluation`'s docstring).

`build_evaluator` turns a contract's procedure, its selected rows and the run's settings into an `Evaluator`:
a function of the model (the policy or reward model being trained, unwrapped) that returns the procedure's
metrics. `pref-v1` scores the reference once, when the evaluator is built, so it must be built from the model as
loaded, before training changes it. `ContractEvaluationMixin` makes a Trainer's `evaluate()` run the evaluator
(during training, at every evaluation, which the best-checkpoint choice reads, and at the end); `v1` (SFT) keeps
the Trainer's own evaluation loop.

Only `trainer.run.main` imports this module (it imports torch at the top).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from trainer.evaluation import V1_EVAL_BATCH_SIZE, EvalContractError
from trainer.rewards import REGISTRY, metric_name

Evaluator = Callable[[Any], dict[str, float]]
Row = Mapping[str, Any]


def build_evaluator(
    procedure: str, rows: Any, tokenizer: Any, model: Any, training_args: Any, reward_names: Sequence[str] = ()
) -> Evaluator | None:
    """The evaluator of `procedure` over `rows` (a datasets split), or None for `v1` (the Trainer's own loop)."""
    if procedure == "v1":
        return None
    rows = [dict(row) for row in rows]
    if not rows:
        raise EvalContractError(f"procedure {procedure}: the eval split has no rows")
    if procedure == "pref-v1":
        _require_columns(rows, ("prompt", "chosen", "rejected"), procedure)
        # Scored on the run's device (where the Trainer puts the model anyway), not on the CPU it was loaded to.
        reference = model.to(training_args.device)
        return PreferenceEvaluator(rows, tokenizer, training_args.beta, training_args.max_length, reference)
    if procedure == "reward-v1":
        _require_columns(rows, ("chosen", "rejected"), procedure)
        return PairwiseEvaluator(rows, tokenizer, training_args.max_length)
    if procedure == "gen-v1":
        _require_columns(rows, ("prompt",), procedure)
        weights = training_args.reward_weights or [1.0] * len(reward_names)
        return GenerationEvaluator(rows, tokenizer, training_args.max_completion_length, reward_names, weights)
    raise EvalContractError(f"no evaluator for procedure {procedure!r}")


def _require_columns(rows: list[dict[str, Any]], columns: tuple[str, ...], procedure: str) -> None:
    present = set(rows[0])
    missing = [name for name in columns if name not in present]
    if missing:
        raise EvalContractError(
            f"procedure {procedure} needs eval columns {list(columns)}; the eval split lacks {missing} "
            f"(it has {sorted(present)})"
        )


def encode(tokenizer: Any, content: str | list[dict[str, Any]], generation_prompt: bool = False) -> list[int]:
    """Token ids of standard text, or of messages through the chat template (as TRL's `_tokenize` does)."""
    if isinstance(content, str):
        return list(tokenizer(text=content)["input_ids"])
    encoded = tokenizer.apply_chat_template(
        content, tokenize=True, return_dict=True, add_generation_prompt=generation_prompt
    )
    return list(encoded["input_ids"])


def _with_eos(tokenizer: Any, completion: Any) -> Any:
    if isinstance(completion, str) and not completion.endswith(tokenizer.eos_token):
        return completion + tokenizer.eos_token
    return completion


def common_prefix_length(ids: Sequence[int], other: Sequence[int]) -> int:
    """How many leading tokens two id lists share."""
    length = 0
    for a, b in zip(ids, other, strict=False):
        if a != b:
            break
        length += 1
    return length


def pair_sequences(
    tokenizer: Any, row: Row, max_length: int | None
) -> tuple[tuple[list[int], int], tuple[list[int], int]]:
    """(ids, completion start) of prompt+chosen and prompt+rejected, tokenized as TRL's DPOTrainer does."""
    prompt = encode(tokenizer, row["prompt"], generation_prompt=not isinstance(row["prompt"], str))
    chosen = encode(tokenizer, row["prompt"] + _with_eos(tokenizer, row["chosen"]))
    rejected = encode(tokenizer, row["prompt"] + _with_eos(tokenizer, row["rejected"]))
    # The completion starts where the prompt's tokens and the whole sequence's diverge (never at 0: a first token
    # has nothing to be predicted from).
    start = max(1, min(common_prefix_length(prompt, chosen), common_prefix_length(prompt, rejected)))
    if max_length:
        chosen, rejected = chosen[:max_length], rejected[:max_length]
    return (chosen, start), (rejected, start)


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def completion_logp(model: Any, ids: list[int], start: int) -> float:
    """Sum of the log-probabilities of `ids[start:]`, each given the tokens before it."""
    if start >= len(ids):
        return 0.0
    input_ids = torch.tensor([ids], device=_device(model))
    logits = model(input_ids=input_ids).logits[0, :-1].float()
    targets = input_ids[0, 1:]
    token_logps = torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None])[:, 0]
    return float(token_logps[start - 1 :].sum())


class PreferenceEvaluator:
    """`pref-v1`: implicit-reward accuracy and margin of held-out pairs against the model as it was when built."""

    def __init__(self, rows: list[dict[str, Any]], tokenizer: Any, beta: float, max_length: int | None, reference: Any):
        self.beta = beta
        self.sequences = [pair_sequences(tokenizer, row, max_length) for row in rows]
        self.reference = self._logps(reference)

    def _logps(self, model: Any) -> list[tuple[float, float]]:
        return [
            (completion_logp(model, *chosen), completion_logp(model, *rejected)) for chosen, rejected in self.sequences
        ]

    def __call__(self, model: Any) -> dict[str, float]:
        """Score the pairs with `model` and compare with the reference."""
        margins = [
            self.beta * ((chosen - ref_chosen) - (rejected - ref_rejected))
            for (chosen, rejected), (ref_chosen, ref_rejected) in zip(self._logps(model), self.reference, strict=True)
        ]
        return {
            "eval_preference_accuracy": sum(margin > 0 for margin in margins) / len(margins),
            "eval_reward_margin": sum(margins) / len(margins),
        }


class PairwiseEvaluator:
    """`reward-v1`: how often a reward model scores the chosen completion above the rejected one."""

    def __init__(self, rows: list[dict[str, Any]], tokenizer: Any, max_length: int | None):
        self.sequences = []
        for row in rows:
            prompt = row.get("prompt")
            texts = [_with_eos(tokenizer, row[key]) for key in ("chosen", "rejected")]
            ids = [encode(tokenizer, prompt + text if prompt is not None else text) for text in texts]
            self.sequences.append(tuple(seq[:max_length] if max_length else seq for seq in ids))

    @torch.no_grad()
    def __call__(self, model: Any) -> dict[str, float]:
        """Score every pair's two sequences, one at a time."""
        device = _device(model)
        margins = []
        for chosen, rejected in self.sequences:
            scores = [
                float(model(input_ids=torch.tensor([ids], device=device)).logits[0, 0]) for ids in (chosen, rejected)
            ]
            margins.append(scores[0] - scores[1])
        return {
            "eval_pairwise_accuracy": sum(margin > 0 for margin in margins) / len(margins),
            "eval_reward_margin": sum(margins) / len(margins),
        }


class GenerationEvaluator:
    """`gen-v1`: greedy completions of held-out prompts, scored by the run's reward functions."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        tokenizer: Any,
        max_completion_length: int,
        reward_names: Sequence[str],
        weights: Sequence[float],
    ):
        self.rows = rows
        self.tokenizer = tokenizer
        self.max_new_tokens = max_completion_length
        self.reward_names = list(reward_names)
        self.weights = list(weights)
        self.prompt_ids = [encode(tokenizer, row["prompt"], generation_prompt=True) for row in rows]

    def generate(self, model: Any) -> list[list[int]]:
        """Greedy completion token ids of every prompt, in row order (up to and with the first EOS, no padding)."""
        from transformers import GenerationConfig

        tokenizer = self.tokenizer
        eos = [tokenizer.eos_token_id]
        declared = model.generation_config.eos_token_id
        eos += [i for i in ([declared] if isinstance(declared, int) else declared or []) if i not in eos]
        config = GenerationConfig(
            do_sample=False, max_new_tokens=self.max_new_tokens, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos
        )
        device = _device(model)
        generated: list[list[int]] = []
        for begin in range(0, len(self.prompt_ids), V1_EVAL_BATCH_SIZE):
            batch = self.prompt_ids[begin : begin + V1_EVAL_BATCH_SIZE]
            width = max(len(ids) for ids in batch)
            input_ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(ids)) + ids for ids in batch])
            mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
            with torch.no_grad():
                out = model.generate(
                    input_ids=input_ids.to(device), attention_mask=mask.to(device), generation_config=config
                )
            for ids in out[:, width:].tolist():
                ends = [index for index, token in enumerate(ids) if token in eos]
                generated.append(ids[: ends[0] + 1] if ends else ids)
        return generated

    def completions(self, model: Any) -> list[Any]:
        """Greedy completions of every prompt, in row order (text, or one assistant message for chat prompts)."""
        texts = self.tokenizer.batch_decode(self.generate(model), skip_special_tokens=True)
        return [
            text if isinstance(row["prompt"], str) else [{"role": "assistant", "content": text}]
            for row, text in zip(self.rows, texts, strict=True)
        ]

    def __call__(self, model: Any) -> dict[str, float]:
        """Generate, score with each reward function, and average."""
        completions = self.completions(model)
        columns = {key: [row[key] for row in self.rows] for key in self.rows[0] if key != "prompt"}
        prompts = [row["prompt"] for row in self.rows]
        totals = [0.0] * len(completions)
        metrics: dict[str, float] = {}
        for name, weight in zip(self.reward_names, self.weights, strict=True):
            rewards = REGISTRY[name](completions=completions, prompts=prompts, **columns)
            metrics[metric_name(name)] = sum(rewards) / len(rewards)
            totals = [total + weight * reward for total, reward in zip(totals, rewards, strict=True)]
        metrics["eval_mean_reward"] = sum(totals) / len(totals)
        return metrics


class ContractEvaluationMixin:
    """Makes a Trainer's `evaluate()` run the contract's evaluator (when one is set) instead of its eval loop.

    The metrics are logged (so the tracking callback records them at the current step) and passed to the
    callbacks' `on_evaluate`, and returned: the Trainer ranks checkpoints by them as by its own.
    """

    contract_evaluator: Evaluator | None = None

    def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None, metric_key_prefix: str = "eval") -> Any:
        """Run the contract's evaluator on the unwrapped model in eval mode; the Trainer's own loop without one."""
        trainer: Any = self
        if self.contract_evaluator is None:
            return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)  # type: ignore[misc]
        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training = model.training
        model.eval()
        try:
            metrics = self.contract_evaluator(model)
            # TRL's trainers pick train or eval metrics to flush by the model's mode: eval mode flushes their (empty)
            # eval ones, leaving the train metrics gathered since the last log for the next train log.
            trainer.log(dict(metrics))
        finally:
            model.train(was_training)
        trainer.control = trainer.callback_handler.on_evaluate(trainer.args, trainer.state, trainer.control, metrics)
        return metrics
