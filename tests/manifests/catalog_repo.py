"""Build a throw-away repository for catalog tests: a copy of manifests/ and trainer/, plus a model folder.

The model folder holds the tiny Llama's real `config.json` numbers and a weights file: the catalog
only pins local folders by the sha256 of their files and reads `config.json` for the memory
estimate, so this is all it reads. (Building the real tiny model costs ~10 s of torch imports; the
trainer-marked test in tests/manifests/ does that.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"

TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 861,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
}


def make_repo(root: Path, *, with_model: bool = True) -> Path:
    """Copy manifests/ and trainer/*.py under `root`; add `.finetune/models/tiny-llama` unless told not to."""
    shutil.copytree(MANIFESTS, root / "manifests")
    shutil.copytree(REPO / "trainer", root / "trainer", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if with_model:
        model = root / ".finetune" / "models" / "tiny-llama"
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps(TINY_CONFIG), encoding="utf-8")
        (model / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    return root / "manifests"


def copy_manifests(catalog: Path) -> Path:
    """Copy manifests/ to `catalog` without the datasets' data (their entries stay): a test catalog that lives
    elsewhere points its recipes' local pins back at the repository's files."""

    def data(directory: str, names: list[str]) -> list[str]:
        return [name for name in names if not name.endswith(".yaml")] if Path(directory).name == "datasets" else []

    shutil.copytree(MANIFESTS, catalog, ignore=data)
    return catalog


def write(catalog_dir: Path, relative: str, text: str) -> Path:
    """Write (or overwrite) one manifest file of a test catalog."""
    path = catalog_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def team_rows(count: int = 12) -> list[str]:
    """A team's prompt/completion rows, one JSON line each (questions about the team's own service)."""
    return [
        json.dumps({"prompt": f"How do I restart worker {i}?", "completion": f"Run `svc restart worker-{i}`."})
        for i in range(count)
    ]


def add_team_dataset(
    catalog_dir: Path, *, train: list[str] | None = None, with_eval: bool = True, recipe: bool = True
) -> Path:
    """A team's own prompt/completion dataset `team-qa` (train.jsonl and eval.jsonl, one line per row given as
    written) and, unless told not to, a recipe `sft-team-faq` on it (sft-tiny's model and defaults); the folder."""
    folder = catalog_dir / "datasets" / "team-qa"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("\n".join(team_rows() if train is None else train) + "\n", encoding="utf-8")
    if with_eval:
        (folder / "eval.jsonl").write_text("\n".join(team_rows(4)) + "\n", encoding="utf-8")
    write(
        catalog_dir,
        "datasets/team-qa.yaml",
        "name: team-qa\ndescription: The team's own questions and answers.\n"
        "path: manifests/datasets/team-qa\nformat: prompt_completion\n",
    )
    if recipe:
        base = (catalog_dir / "recipes" / "sft-tiny.yaml").read_text(encoding="utf-8")
        start = base.index("dataset:")
        end = base.index("eval:")
        text = base[:start] + "dataset: {name: team-qa, split: train}\n" + base[end:]
        text = text.replace("name: sft-tiny\n", "name: sft-team-faq\n", 1)
        text = text[: text.index("serving:")] + text[text.index("defaults:") :]
        write(catalog_dir, "recipes/sft-team-faq.yaml", text)
    return folder
