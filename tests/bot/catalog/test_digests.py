"""Content digests and the eval contract hash."""

from __future__ import annotations

from bot.catalog import eval_contract_hash


def test_eval_contract_hash_is_order_independent() -> None:
    base = {"dataset": "d", "revision": "r", "split": "eval", "max_samples": 0, "procedure_version": "v1", "seed": 0}
    assert eval_contract_hash({**base, "metrics": ["b", "a"]}) == eval_contract_hash(
        {**base, "metrics": ["a", "b", "a"]}
    )
    assert eval_contract_hash({**base, "metrics": ["a"]}) != eval_contract_hash({**base, "seed": 1, "metrics": ["a"]})
