"""`python -m trainer [--trainer sft|dpo|grpo|kto|reward|rloo] --config recipe-trainer.yaml [--key value ...]`."""

from __future__ import annotations

import os
import sys


def run(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the chosen trainer; return the exit code."""
    # TRL pings the Hub's telemetry whenever a trainer starts; a job pings nothing. Set before TRL is imported (and
    # read again when the trainer starts, see trainer.lean).
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from trainer.config import parse_args
    from trainer.run import main
    from trainer.termination import last_word

    with last_word():  # an exception that ends the job is its termination message (what Kubernetes relays)
        script_args, training_args, model_args, eval_args = parse_args(argv)
        return main(script_args, training_args, model_args, eval_args)


if __name__ == "__main__":
    sys.exit(run())
