"""`LeanSFTTrainer`: TRL's `SFTTrainer` without two costs a run pays for nothing (measured with bench/trainer.py).

- TRL writes a draft model card (`README.md` in the output folder, for the Hub) before every checkpoint.
  Nothing here reads it (a run is described by its tracking and its checkpoint manifests), and on the tiny
  recipe it cost about as much as writing the weights.
- The Trainer counts the model's non-embedding parameters again at every step, for `total_flos`: a walk over
  every module and parameter. The count does not change during training, so it is taken once.

Only `trainer.sft.main` imports this module (it imports TRL at the top, to subclass `SFTTrainer`).
"""

from __future__ import annotations

from typing import Any

from trl import SFTTrainer


class LeanSFTTrainer(SFTTrainer):
    """`SFTTrainer` with no draft model card at checkpoints and the parameter count behind `total_flos` cached."""

    _non_embedding_parameters: int | None = None

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        """Write no draft model card (TRL calls this before every checkpoint)."""

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """The Trainer's estimate, 6 x input tokens x non-embedding parameters, with the parameters counted once."""
        model: Any = self.model
        main_input = getattr(model, "main_input_name", "input_ids")
        if main_input not in inputs or not hasattr(model, "num_parameters"):
            return 0
        if self._non_embedding_parameters is None:
            self._non_embedding_parameters = int(model.num_parameters(exclude_embeddings=True))
        return 6 * int(inputs[main_input].numel()) * self._non_embedding_parameters
