"""Pins and the pin gate: local content digests, remote revisions, exploration, the eval contract."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.catalog import Catalog, PlanError, content_digest
from tests.bot.catalog.planning import plan
from tests.manifests.catalog_repo import make_repo


def test_local_pins_are_the_trainers_digests(catalog: Catalog, catalog_dir: Path) -> None:
    from trainer.data import dataset_digest
    from trainer.evaluation import contract_hash

    result = plan(catalog, "run recipe=sft-tiny")
    data = catalog_dir / "datasets" / "tiny-chat"
    assert result.params["dataset_digest"] == dataset_digest(data)
    assert result.pins["dataset"] == f"manifests/datasets/tiny-chat@{dataset_digest(data)}"
    assert result.eval_contract_hash == contract_hash(result.eval_contract) == result.params["eval_contract_hash"]
    assert result.eval_contract["revision"] == dataset_digest(data)
    assert re.fullmatch(r"\.finetune/models/tiny-llama@sha256:[0-9a-f]{64}", result.pins["model"])
    assert result.pins["code"] == content_digest(catalog_dir.parent / "trainer", (".py",))


def test_trainer_accepts_the_eval_contract(catalog: Catalog) -> None:
    from trainer.config import EvalArguments
    from trainer.evaluation import contract_from_args

    result = plan(catalog, "run recipe=sft-tiny")
    fields = {name: result.params[name] for name in EvalArguments.__dataclass_fields__ if name in result.params}
    contract = contract_from_args(EvalArguments(**fields))  # raises if the pinned hash differs
    assert contract is not None and contract.split == "eval"


def test_model_pin_follows_the_files(fresh_dir: Path) -> None:
    before = plan(Catalog.load(fresh_dir), "run recipe=sft-tiny").pins["model"]
    (fresh_dir.parent / ".finetune" / "models" / "tiny-llama" / "model.safetensors").write_bytes(b"retrained")
    after = plan(Catalog.load(fresh_dir), "run recipe=sft-tiny").pins["model"]
    assert before != after


def test_missing_local_model_says_how_to_build_it(tmp_path: Path) -> None:
    catalog = Catalog.load(make_repo(tmp_path / "repo", with_model=False))
    with pytest.raises(PlanError, match=r"python -m trainer\.tiny_model \.finetune/models/tiny-llama"):
        plan(catalog, "run recipe=sft-tiny")
    relaxed = plan(catalog, "run recipe=sft-tiny", require_local=False)
    assert relaxed.pins["model"].endswith("@unbuilt")
    assert any("not built" in warning for warning in relaxed.warnings)
    assert relaxed.memory is None


def test_local_dataset_pinned_digest_must_match(fresh_dir: Path) -> None:
    recipe = fresh_dir / "recipes" / "sft-tiny.yaml"
    text = recipe.read_text().replace("  split: train\n", "  split: train\n  digest: sha256:" + "0" * 64 + "\n", 1)
    recipe.write_text(text)
    with pytest.raises(PlanError, match="changed: its digest is sha256:"):
        plan(Catalog.load(fresh_dir), "run recipe=sft-tiny")


PIN_CASES = [
    (
        "image: ghcr.io/finetune-bot/trainer@sha256:dda8",
        "image: ghcr.io/finetune-bot/trainer:latest\n#",
        "floating tag",
    ),
    ("  revision: 04e05ee7960fdeb388a2533000606fa127aed615", "  revision: main", "model revision 'main'"),
    ("  revision: 74d00a4527076fe5d19d4211aa2db1a930aee10b", "  revision: v1.0", "dataset revision 'v1.0'"),
    (
        "  digest: sha256:891fe019decbff3bdd6af41950bfecc2fbf019e9c1f7ef7603bb40f8db4186c4\n",
        "",
        "has no content digest",
    ),
    ("code: {revision: 31f2ffa07aa2ffee072757a9dab0df79508c4fb9}", "code: {revision: main}", "code revision 'main'"),
]


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    PIN_CASES,
    ids=["floating-image-tag", "model-branch", "dataset-tag", "missing-dataset-digest", "code-branch"],
)
def test_pin_gate(fresh_dir: Path, old: str, new: str, reason: str) -> None:
    recipe = fresh_dir / "recipes" / "sft-qwen-0p5b-lora.yaml"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new, 1))
    with pytest.raises(PlanError) as info:
        plan(Catalog.load(fresh_dir), "run recipe=sft-qwen-0p5b-lora")
    assert "is not pinned" in info.value.message and reason in info.value.message
    assert "exploration: true" in info.value.message
    recipe.write_text(text.replace(old, new, 1) + "exploration: true\n")
    explored = plan(Catalog.load(fresh_dir), "run recipe=sft-qwen-0p5b-lora")
    assert not explored.comparable and "non-comparable" in explored.tags
    assert any(reason in item for item in explored.unpinned)
    assert any(w.startswith("non-comparable") for w in explored.warnings)


def test_exploration_recipe_is_non_comparable(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=explore-qwen-0p5b")
    assert result.comparable is False
    assert len(result.unpinned) == 3
