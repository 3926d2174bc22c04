"""Which run's results give a compared run its numbers on one eval contract: its own final evaluation, or an
evaluation of it (`/finetune eval RUN suite=S`, a run of kind `eval`) on the contract the others share.

An evaluation's contract is a training run's on the same suite (bot.evals), so its numbers are the evaluated
run's: `compare sft-tiny-lmeval-… sft-tiny-…` after `eval sft-tiny-… suite=tiny` compares both on `tiny`. Pure:
the evaluations are looked up by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from storage.models import Run

EVAL = "eval"


@dataclass(frozen=True)
class Measured:
    """A compared run (`run`: training, shown by its name and hyperparameters) and the run whose results give its
    numbers (`by`: itself, or an evaluation of it)."""

    run: Run
    by: Run

    @property
    def evaluated(self) -> bool:
        """Whether its numbers come from an evaluation of it, not its own final evaluation."""
        return self.by is not self.run


def newest_evaluations(runs: Sequence[Run]) -> dict[tuple[int, str], Run]:
    """The newest succeeded evaluation of each (evaluated run, contract hash) among `runs` (newest first)."""
    found: dict[tuple[int, str], Run] = {}
    for run in runs:
        if run.kind == EVAL and run.status == "succeeded" and run.parent_run_id is not None:
            found.setdefault((run.parent_run_id, run.eval_contract_hash), run)
    return found


def measured_on(
    picked: Sequence[Measured], evaluation: Callable[[Run, str], Run | None]
) -> tuple[list[Measured], str | None]:
    """The runs measured on one shared contract where one can be found, and its hash: each run's own contract, in
    the order the runs were named, is tried, a run without it taking its newest succeeded evaluation on it
    (`evaluation(run, hash)`). None: no contract is had by all; the runs are returned as they were picked."""
    for contract in dict.fromkeys(m.by.eval_contract_hash for m in picked if m.by.eval_contract_hash):
        shared: list[Measured] = []
        for m in picked:
            if m.by.eval_contract_hash == contract:
                shared.append(m)
            elif (other := evaluation(m.run, contract)) is not None:
                shared.append(Measured(run=m.run, by=other))
            else:
                break
        else:
            return shared, contract
    return list(picked), None


def evaluation_advice(picked: Sequence[Measured], suites: Mapping[str, str]) -> str:
    """What makes runs on different contracts comparable: evaluating the others on a suite one of them was judged
    on (`suites`: contract hash -> suite name, harness contracts only); empty when no suite is involved."""
    for contract, suite in suites.items():
        missing = [m.run.name for m in picked if m.by.eval_contract_hash != contract]
        if missing:
            commands = ", ".join(f"`/finetune eval {name} suite={suite}`" for name in missing)
            return (
                f" To compare them on suite *{suite}*, evaluate the others on it first: {commands}, then compare again."
            )
    return ""


def harness_suite(run: Run) -> str | None:
    """The harness suite a run was judged on, as its pins name it (None for the bot's own eval procedures)."""
    suite = str((run.pins or {}).get("eval_suite") or "").partition("@")[0]
    return suite or None
