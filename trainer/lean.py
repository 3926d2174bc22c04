"""Lean TRL trainers: every TRL trainer class without three costs a run pays for nothing (see bench/trainer.py).

- TRL writes a draft model card (`README.md` in the output folder, for the Hub) before every checkpoint, in every
  trainer (`_BaseTrainer.create_model_card`). Nothing here reads it (a run is described by its tracking and its
  checkpoint manifests), and on the tiny recipe it cost about as much as writing the weights.
- The Trainer counts the model's non-embedding parameters again at every step, for `total_flos`: a walk over
  every module and parameter. The count does not change during training, so it is taken once.
- TRL pings the Hub's telemetry endpoint when a trainer starts. `python -m trainer` sets
  `HF_HUB_DISABLE_TELEMETRY=1` before it imports TRL, but huggingface_hub reads that variable once, at import, and a
  job forked from a preloaded interpreter has imported it already: the variable is read again here, when the
  trainer starts.

`lean_trainer_class(TRLTrainerClass)` returns the lean subclass (one per class); `LeanSFTTrainer` is SFT's. Only
`trainer.run.main` imports this module (it imports TRL at the top).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from trl import SFTTrainer

_TRUE = ("1", "true", "yes", "on")


class LeanTrainerMixin:
    """No draft model card at checkpoints, the parameter count behind `total_flos` cached, telemetry by the env."""

    _non_embedding_parameters: int | None = None

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        """Write no draft model card (TRL calls this before every checkpoint)."""

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """The Trainer's estimate, 6 x input tokens x non-embedding parameters, with the parameters counted once."""
        trainer: Any = self  # the Trainer this mixes into
        model: Any = trainer.model
        main_input = getattr(model, "main_input_name", "input_ids")
        if main_input not in inputs or not hasattr(model, "num_parameters"):
            return 0
        if self._non_embedding_parameters is None:
            self._non_embedding_parameters = int(model.num_parameters(exclude_embeddings=True))
        return 6 * int(inputs[main_input].numel()) * self._non_embedding_parameters

    def _send_telemetry(self) -> None:
        """Ping TRL's telemetry only when `HF_HUB_DISABLE_TELEMETRY` (read now, not at import) allows it."""
        if os.environ.get("HF_HUB_DISABLE_TELEMETRY", "").lower() in _TRUE:
            return
        super()._send_telemetry()  # type: ignore[misc]


@functools.cache
def lean_trainer_class(base: type, *mixins: type) -> type:
    """The lean subclass of a TRL trainer class, with `mixins` first in its bases (one class object per arguments)."""
    return type(f"Lean{base.__name__}", (*mixins, LeanTrainerMixin, base), {"__module__": __name__})


LeanSFTTrainer = lean_trainer_class(SFTTrainer)
