"""`python -m trainer --config recipe-trainer.yaml [--key value ...]`."""

from __future__ import annotations

import sys

from trainer.config import parse_args


def run(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the SFT main; return the exit code."""
    from trainer.sft import main

    script_args, training_args, model_args, eval_args = parse_args(argv)
    return main(script_args, training_args, model_args, eval_args)


if __name__ == "__main__":
    sys.exit(run())
