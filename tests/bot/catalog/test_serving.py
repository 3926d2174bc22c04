"""Compiling a serving check: the recipe's `serving:` section, its pinned prompt set, and Polyaxon's checker."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.catalog import Catalog, PlanError
from bot.polyaxon.spec import to_pod_spec

UUID = "0123456789abcdef0123456789abcdef"


def test_the_serving_check_of_sft_tiny_compiles_with_its_pins_and_init_step(catalog: Catalog) -> None:
    plan, digest = catalog.plan_serving_check("sft-tiny", checkpoint="outputs/model", model_run=UUID)
    assert plan.kind == "serving" and plan.component == "serving-check" and not plan.comparable
    assert plan.params["checkpoint"] == "outputs/model" and plan.params["model_run"] == UUID
    assert plan.params["prompts"] == "manifests/serving/tiny-chat-prompts.jsonl"
    assert plan.params["prompts_digest"] == plan.pins["prompt_set"] and digest.startswith("sha256:")
    assert plan.params["max_new_tokens"] == 32 and plan.params["engine"] == "transformers"
    assert plan.presets == ["cpu-small"] and plan.provenance["max_new_tokens"].endswith("serving.max_new_tokens")
    init = plan.operation["component"]["run"]["init"]
    assert init == [{"artifacts": {"dirs": ["{{ model_run }}/{{ checkpoint }}"]}}]
    # On Kubernetes an init container puts the version's folder where the job reads it.
    spec = to_pod_spec(plan.operation)["batchJobSpec"]["template"]["spec"]
    pulls = [
        c["name"]
        for c in spec["initContainers"]
        if any(f"/plx-context/artifacts/{UUID}/outputs/model" in arg for arg in c.get("args") or [])
    ]
    assert pulls and pulls[0].startswith("polyaxon-init-artifacts"), spec["initContainers"]
    _, again = catalog.plan_serving_check("sft-tiny", checkpoint="outputs/model", model_run="f" * 32)
    assert again == digest, "the spec digest names the serving spec, not the version"


def test_a_changed_prompt_set_or_a_recipe_without_serving_is_refused(fresh_dir: Path) -> None:
    prompts = fresh_dir.parent / "manifests" / "serving" / "tiny-chat-prompts.jsonl"
    prompts.write_text(prompts.read_text() + '{"id": "new", "messages": [{"role": "user", "content": "hi"}]}\n')
    catalog = Catalog.load(fresh_dir)
    with pytest.raises(PlanError, match=r"prompt set manifests/serving/tiny-chat-prompts\.jsonl changed: its pin is"):
        catalog.plan_serving_check("sft-tiny", checkpoint="outputs/model", model_run=UUID)
    with pytest.raises(PlanError, match="has no `serving:` section"):
        catalog.plan_serving_check("quickstart", checkpoint="outputs/model", model_run=UUID)
    prompts.unlink()
    with pytest.raises(PlanError, match="does not exist"):
        catalog.plan_serving_check("sft-tiny", checkpoint="outputs/model", model_run=UUID)
