"""Build the tiny Llama-style model that tests and the `sft-tiny` recipe train.

`python -m trainer.tiny_model [OUT_DIR]` (default `.finetune/models/tiny-llama`) trains a ByteLevel BPE
tokenizer with the `tokenizers` library on the tiny dataset's text, gives it a ChatML chat template
with `{% generation %}` markers (so `assistant_only_loss=True` works), builds a ~3M-parameter
`LlamaForCausalLM` from a config with a fixed seed, and writes both with `save_pretrained`. The
trainer then loads the folder by path, exactly as it would load a hub model. Same command, same bytes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from trainer.tiny_data import chat_rows, text_rows

DEFAULT_OUT = Path(".finetune/models/tiny-llama")
SEED = 0
VOCAB_SIZE = 2048
PAD_TOKEN = "<|endoftext|>"
BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "<|im_start|>assistant\n{% generation %}{{ message['content'] }}<|im_end|>{% endgeneration %}\n"
    "{% else %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _corpus() -> list[str]:
    rows = chat_rows(2000, seed=SEED + 1)
    lines = []
    for row in rows:
        for message in row["messages"]:
            lines.append(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n")
    lines.extend(row["text"] for row in text_rows(500, seed=SEED + 2))
    return lines


def build_tokenizer() -> Any:
    """Train the ByteLevel BPE tokenizer and wrap it as a `PreTrainedTokenizerFast` with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    bpe_trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[PAD_TOKEN, BOS_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_corpus(), trainer=bpe_trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        model_max_length=512,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def build_model(vocab_size: int, pad_id: int, bos_id: int, eos_id: int) -> Any:
    """Build the seeded random-init Llama (hidden 256, 4 layers, 4 heads / 2 KV heads, tied embeddings)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
    )
    torch.manual_seed(SEED)
    return LlamaForCausalLM(config)


def build_tiny_model(out_dir: Path) -> Path:
    """Write the tiny tokenizer and model into `out_dir` (created if needed) and return it."""
    tokenizer = build_tokenizer()
    model = build_model(
        len(tokenizer),
        tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        tokenizer.convert_tokens_to_ids(BOS_TOKEN),
        tokenizer.convert_tokens_to_ids(EOS_TOKEN),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    # Written beside it and moved in with config.json last: whoever sees config.json sees a whole model, even
    # while another process (a parallel test worker) builds the same bytes into the same folder.
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}-", dir=out_dir.parent) as tmp:
        staging = Path(tmp)
        tokenizer.save_pretrained(staging)
        model.save_pretrained(staging)
        files = sorted(staging.iterdir(), key=lambda f: f.name == "config.json")
        for file in files:
            os.replace(file, out_dir / file.name)
    return out_dir


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m trainer.tiny_model [OUT_DIR]`."""
    parser = argparse.ArgumentParser(prog="python -m trainer.tiny_model", description=__doc__)
    parser.add_argument("out_dir", type=Path, nargs="?", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    print(build_tiny_model(args.out_dir))


if __name__ == "__main__":
    main()
