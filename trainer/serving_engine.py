"""The serving check's one built-in engine: transformers, loading a `save_pretrained` folder as a server would.

`TransformersEngine.load` reads the tokenizer and the model (`from_pretrained`, the given dtype, moved to
CUDA when there is one), refuses a tokenizer without a chat template, and puts the model in eval mode.
`generate` serves one request: the chat template applied as in training
(`apply_chat_template(messages, add_generation_prompt=True)`), greedy decoding under `torch.inference_mode()`
until an end token (the eos tokens and the template's end-of-turn token) or `max_new_tokens`.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.serving_checks import ServingError

DTYPES = ("float32", "bfloat16", "float16")
_SENTINEL = "\x00serving-check-end-of-turn\x00"


@dataclass(frozen=True)
class Generation:
    """One served request: the text (special tokens skipped), the tokens generated (the end token included)."""

    output: str
    new_tokens: int
    latency_ms: float  # template + tokenize + generate + decode, as the client waits for it
    generate_s: float  # model.generate alone, for tokens/s
    finish_reason: str  # "stop": an end token was generated; "length": max_new_tokens ran out


def template_digest(template: Any) -> str:
    """`sha256:<hex>` of the chat template text (a dict of named templates: of its sorted JSON)."""
    text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (`getrusage`: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The token that follows an assistant message in the chat template, when it is one special token.

    Rendered with a sentinel reply: ChatML gives `<|im_end|>`, Llama 3 `<|eot_id|>`, Gemma `<end_of_turn>`.
    """
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENTINEL}]
    try:
        rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    except Exception:  # a template that refuses this conversation has no end-of-turn token we can find
        return []
    if not isinstance(rendered, str) or _SENTINEL not in rendered:
        return []
    after = rendered.split(_SENTINEL, 1)[1]
    ids = tokenizer(after, add_special_tokens=False)["input_ids"] if after else []
    special = set(tokenizer.all_special_ids)
    return [ids[0]] if ids and ids[0] in special else []


class TransformersEngine:
    """Tokenizer + causal LM from one folder, one request at a time."""

    name = "transformers"

    def __init__(self, checkpoint: Path, dtype: str) -> None:
        self.checkpoint = checkpoint
        self.dtype = dtype
        self.device = "cpu"
        self.tokenizer: Any = None
        self.model: Any = None
        self.template: Any = None
        self.end_ids: list[int] = []

    def load(self) -> float:
        """Load tokenizer and model, ready to serve; return the seconds it took. ServingError: no chat template."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        started = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(str(self.checkpoint))
        self.template = getattr(tokenizer, "chat_template", None)
        if not self.template:
            raise ServingError(f"the tokenizer in {self.checkpoint} has no chat template")
        model: Any = AutoModelForCausalLM.from_pretrained(str(self.checkpoint), dtype=getattr(torch, self.dtype))
        model.to(self.device)
        model.eval()
        if self.device == "cuda":
            torch.cuda.synchronize()
        load_s = time.perf_counter() - started
        self.tokenizer, self.model = tokenizer, model
        self.end_ids = self._end_ids()
        if not self.end_ids:
            raise ServingError(f"{self.checkpoint} names no end token (no eos, no end-of-turn token in its template)")
        return load_s

    def _end_ids(self) -> list[int]:
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        ids = configured if isinstance(configured, list) else [configured]
        ids = [*ids, self.tokenizer.eos_token_id, *end_of_turn_ids(self.tokenizer)]
        return sorted({int(i) for i in ids if i is not None})

    def _sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def generate(self, messages: list[dict[str, str]], max_new_tokens: int) -> Generation:
        """Serve one chat request with greedy decoding."""
        import torch

        self._sync()
        started = time.perf_counter()
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        input_ids = encoded["input_ids"].to(self.device)
        attention_mask = encoded["attention_mask"].to(self.device)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_ids[0]
        with torch.inference_mode():
            self._sync()
            generate_started = time.perf_counter()
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                eos_token_id=self.end_ids,
                pad_token_id=pad_id,
            )
            self._sync()
            generate_s = time.perf_counter() - generate_started
        new = output[0, input_ids.shape[1] :].tolist()
        stopped = bool(new) and new[-1] in self.end_ids
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        latency_ms = (time.perf_counter() - started) * 1000
        return Generation(text, len(new), latency_ms, generate_s, "stop" if stopped else "length")

    def peak_memory(self) -> tuple[float, float | None]:
        """(peak RSS MiB of this process, peak CUDA memory allocated MiB or None off CUDA)."""
        gpu = None
        if self.device == "cuda":
            import torch

            gpu = round(torch.cuda.max_memory_allocated() / (1024 * 1024), 1)
        return peak_rss_mb(), gpu


def make_engine(name: str, checkpoint: Path, dtype: str) -> TransformersEngine:
    """The engine called `name`; ServingError for one this program does not have."""
    if name != TransformersEngine.name:
        raise ServingError(f"engine {name} is not built into this program; a serving image must write the same report")
    if dtype not in DTYPES:
        raise ServingError(f"dtype {dtype} is not one of {', '.join(DTYPES)}")
    return TransformersEngine(checkpoint, dtype)
