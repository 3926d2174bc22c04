"""Loading and validating manifests: the shipped catalog loads; malformed files name the file and field."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bot.catalog import Catalog, CatalogError, check_catalog
from tests.manifests.catalog_repo import write


def test_shipped_catalog_loads(catalog: Catalog) -> None:
    assert {"sft-tiny", "sft-lora"} <= set(catalog.recipes)
    assert {"cpu-small", "gpu-1x", "gpu-8x", "spot"} <= set(catalog.presets)
    assert set(catalog.components) == {
        "trl-sft",
        "trl-sft-distributed",
        "trl-dpo",
        "trl-kto",
        "trl-reward",
        "trl-grpo",
        "trl-rloo",
        "serving-check",
        "trl-preflight",
        "trl-preflight-distributed",
        "axolotl",
        "lm-eval",
        "quickstart",
        "quickstart-tf",
    }
    for preset in catalog.presets.values():
        assert preset.description and "\n" not in preset.description
        assert "name" not in preset.document and "description" not in preset.document
    recipe = catalog.recipes["sft-tiny"]
    assert recipe.hash == "sha256:" + hashlib.sha256(recipe.path.read_bytes()).hexdigest()


MALFORMED = [
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nparams:\n  learning_rate: {value: 1}\n",
        "presets/bad.yaml: params.learning_rate: a training key",
    ),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nrunPatch:\n  container:\n    args: [--lr=1]\n",
        "presets/bad.yaml: runPatch.container.args: a preset may not change the command",
    ),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nrunPatch:\n"
        "  environment:\n    labels: {max_steps: '9'}\n",
        "presets/bad.yaml: runPatch.environment.labels.max_steps: max_steps is a training key",
    ),
    ("presets/bad.yaml", "name: bad\nkind: operation\nisPreset: true\n", "presets/bad.yaml: description:"),
    ("presets/bad.yaml", "name: other\ndescription: x\nkind: operation\nisPreset: true\n", "presets/bad.yaml: name:"),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nrun: {kind: job}\n",
        "presets/bad.yaml: run: not a preset key",
    ),
    ("presets/bad.yaml", "name: bad\ndescription: [unclosed\n", "presets/bad.yaml: (file): not valid YAML"),
    ("recipes/bad.yaml", "name: bad\ndescription: x\ncomponent: trl-sft\nlrate: 1\n", "recipes/bad.yaml: lrate:"),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sf\n",
        "no component 'trl-sf'; did you mean trl-sft or trl-kto or trl-dpo?",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\ndefaults: {learning_rat: 1.0}\n",
        "recipes/bad.yaml: defaults.learning_rat: not an input of component trl-sft; did you mean learning_rate?",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\n"
        "overrides: {lr: {input: learning_rate, type: 'float from 0'}}\n",
        "recipes/bad.yaml: overrides.lr.type: unreadable type",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\ndefaults: {learning_rate: 0.5}\n"
        "overrides: {lr: {input: learning_rate, type: 'float in (0, 1e-2]'}}\n",
        "recipes/bad.yaml: defaults.learning_rate: the recipe's own default: 0.5 is out of bounds",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\noverrides: {gpus: {input: lora_r, type: int}}\n",
        "recipes/bad.yaml: overrides.gpus: a cluster setting",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\nmodel: {id: a/b, path: ./m}\n",
        "recipes/bad.yaml: model: give either `path`",
    ),
    ("recipes/bad.yaml", "name: bad\ndescription: x\ncomponent: trl-sft\npresets: [gpu-2x]\n", "no preset 'gpu-2x'"),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\ndefaults: {model_name_or_path: other/model}\n",
        "recipes/bad.yaml: defaults.model_name_or_path: set from the recipe's pins",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: trl-sft\noverrides: {model: {input: model_name_or_path, type: str}}\n",
        "recipes/bad.yaml: overrides.model: model_name_or_path is pinned by the recipe",
    ),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: axolotl\naxolotl_config: axolotl/bad.yml\n",
        "recipes/bad.yaml: axolotl_config: contains Jinja",
    ),
    ("components/bad.yaml", "kind: operation\nname: bad\n", "components/bad.yaml: kind: expected `kind: component`"),
    (
        "recipes/bad.yaml",
        "name: bad\ndescription: x\ncomponent: quickstart\nretry: {max: 2, on: [preempted, code]}\n",
        "recipes/bad.yaml: retry.on: Value error, code is never retried",
    ),
    (
        "presets/bad.yaml",
        "name: bad\ndescription: x\nkind: operation\nisPreset: true\nmaxPending: soon\n",
        "presets/bad.yaml: maxPending: 'soon' is not a duration",
    ),
]


@pytest.mark.parametrize(
    ("relative", "text", "message"),
    MALFORMED,
    ids=[
        "preset-training-param",
        "preset-changes-args",
        "preset-training-key-deep",
        "preset-no-description",
        "preset-name-mismatch",
        "preset-unknown-key",
        "preset-bad-yaml",
        "recipe-unknown-field",
        "recipe-unknown-component",
        "recipe-default-not-an-input",
        "recipe-bad-override-type",
        "recipe-default-out-of-bounds",
        "recipe-cluster-override",
        "recipe-model-both-path-and-id",
        "recipe-unknown-preset",
        "recipe-default-sets-a-pin",
        "recipe-override-sets-a-pin",
        "recipe-axolotl-jinja",
        "component-wrong-kind",
        "recipe-retries-code-errors",
        "preset-bad-start-deadline",
    ],
)
def test_malformed_manifests_name_file_and_field(fresh_dir: Path, relative: str, text: str, message: str) -> None:
    write(fresh_dir, "recipes/axolotl/bad.yml", "base_model: x\nchat_template_jinja: '{{ bos_token }}'\n")
    write(fresh_dir, relative, text)
    with pytest.raises(CatalogError) as info:
        Catalog.load(fresh_dir)
    assert message in str(info.value)
    assert check_catalog(fresh_dir) == [str(info.value)]


def test_axolotl_config_must_match_the_pins(fresh_dir: Path) -> None:
    config = fresh_dir / "recipes" / "axolotl" / "qwen2.5-7b-lora.yml"
    config.write_text(config.read_text().replace("base_model: Qwen/Qwen2.5-7B-Instruct", "base_model: Qwen/Qwen2.5-3B"))
    with pytest.raises(CatalogError, match=r"base_model 'Qwen/Qwen2\.5-3B' is not the pinned model"):
        Catalog.load(fresh_dir)
