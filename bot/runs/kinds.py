"""Run kinds as data: which command, card button and approval reaction applies to which kind of run, and what
the bot says otherwise, naming the way forward. Every command, button and the reaction handler consult this
one table (CONVENTIONS 16); a test walks all of it. Pure: the facts an answer names are looked up by the caller
(`bot.runs.admit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum

from bot.slack.blocks import escape
from storage.models import Run


class RunKind(StrEnum):
    """What a run is. `Run.kind` stores train, sweep, trial, preflight, serving or eval; attempts and resumes are
    training runs told apart by their links (`first_attempt_id`, `parent_run_id`)."""

    TRAIN = "train"
    ATTEMPT = "attempt"  # attempt N > 1 of a failed run, retried by bot.failures on the first attempt's card
    RESUME = "resume"  # `/finetune resume`: a new run that loads a checkpoint of its parent
    SWEEP = "sweep"  # the sweep's own run: its Polyaxon run is the matrix
    TRIAL = "trial"  # one run of a sweep's matrix
    PREFLIGHT = "preflight"  # the short validation run of a distributed recipe
    SERVING = "serving"  # a serving check of a registered version
    EVAL = "eval"  # an evaluation of a run


class Verb(StrEnum):
    """What a member can ask of one run: the run commands (typed, or a card's button) and the approval reaction."""

    STATUS = "status"
    LOGS = "logs"
    STOP = "stop"
    RESUME = "resume"
    COMPARE = "compare"
    OUTPUTS = "outputs"
    REGISTER = "register"
    APPROVE = "approve"  # the approval emoji on one of the run's posts (its card, a report) with no open request


@dataclass(frozen=True)
class Rule:
    """Whether a verb applies to a kind; when it does not, `says` is the answer (a format string over KindFacts)."""

    applies: bool = True
    says: str = ""
    # A sweep's own commands: bot.sweeps answers them for the whole sweep; as one run among others it is refused.
    whole_sweep: bool = False

    @property
    def as_run(self) -> bool:
        """Whether the run commands (bot.runs, bot.outputs, bot.registry) carry it out on this one run."""
        return self.applies and not self.whole_sweep


@dataclass(frozen=True)
class KindFacts:
    """What the answers name, looked up by the caller; empty where the kind has no such thing."""

    name: str
    recipe: str
    again: str  # the command that trains the recipe as this run did: `/finetune run recipe=R k=v`
    sweep: str = ""  # a trial's sweep
    example: str = ""  # one of a sweep's trials (its best, where ranked)
    checked: str = ""  # the training run a serving check's version was registered from, or an eval's run
    version: str = ""  # a serving check's `model:version`
    stage: str = ""  # the stage the promotion that started a serving check asked for


def _no(says: str) -> Rule:
    return Rule(applies=False, says=says)


def _whole(says: str) -> Rule:
    return Rule(whole_sweep=True, says=says)


YES = Rule()
TRAINING: Mapping[Verb, Rule] = dict.fromkeys(Verb, YES)

SWEEP_TRIALS = "The leaderboard in the sweep's thread lists them."
NO_CONTRACT = "it measures no eval contract, so there is nothing to compare"

KINDS: Mapping[RunKind, Mapping[Verb, Rule]] = {
    RunKind.TRAIN: TRAINING,
    RunKind.ATTEMPT: TRAINING,
    RunKind.RESUME: TRAINING,
    RunKind.TRIAL: TRAINING,
    RunKind.SWEEP: {
        Verb.STATUS: _whole("`{name}` is a sweep: `/finetune status {name}` shows its card and leaderboard."),
        Verb.STOP: _whole("`{name}` is a sweep: `/finetune stop {name}` stops its matrix and every trial."),
        Verb.COMPARE: _whole(
            "`{name}` is a sweep, not one run: compare its best trials with `/finetune compare {name} top=3`, "
            "or name trials to compare, e.g. `{example}`. " + SWEEP_TRIALS
        ),
        Verb.LOGS: _no(
            "`{name}` is a sweep: `logs` takes one of its trials, which have its logs, "
            "e.g. `/finetune logs {example}`. " + SWEEP_TRIALS
        ),
        Verb.OUTPUTS: _no(
            "`{name}` is a sweep: `outputs` takes one of its trials, which have its outputs, "
            "e.g. `/finetune outputs {example}`. " + SWEEP_TRIALS
        ),
        Verb.RESUME: _no(
            "`{name}` is a sweep: `resume` takes one of its trials, which have a checkpoint, "
            "e.g. `/finetune resume {example}`. " + SWEEP_TRIALS
        ),
        Verb.REGISTER: _no(
            "`{name}` is a sweep, not a model: `register` takes one of its trials, "
            "e.g. `/finetune register {example} model=NAME`. " + SWEEP_TRIALS
        ),
        Verb.APPROVE: _no(
            "`{name}` is a sweep, not a model, so :{reaction}: approves nothing here. Register one of its trials, "
            "e.g. `/finetune register {example} model=NAME`; approvals count on the request message it posts."
        ),
    },
    RunKind.PREFLIGHT: {
        Verb.STATUS: YES,
        Verb.LOGS: YES,
        Verb.STOP: YES,
        Verb.COMPARE: _no(
            "`{name}` is a preflight: it validates {recipe}'s distributed setup and " + NO_CONTRACT + ". "
            "Compare training runs: `{again}` trains one."
        ),
        Verb.OUTPUTS: _no(
            "`{name}` is a preflight: its report is in its thread, and it keeps no model or checkpoints to read "
            "back. `outputs` is for training runs: `{again}` trains one."
        ),
        Verb.RESUME: _no(
            "`{name}` is a preflight: it validates a distributed recipe and trains nothing to go on with, so "
            "resume is for training runs. Run the recipe it validated: `{again}`."
        ),
        Verb.REGISTER: _no(
            "`{name}` is a preflight, not a model: it validates {recipe}'s distributed setup. Train it with "
            "`{again}`, then register that run."
        ),
        Verb.APPROVE: _no(
            "`{name}` is a preflight, not a model, so :{reaction}: approves nothing here: its report is the "
            "smoke-first gate's evidence. Train the recipe with `{again}`, then register that run."
        ),
    },
    RunKind.SERVING: {
        Verb.STATUS: YES,
        Verb.LOGS: YES,
        Verb.STOP: YES,
        Verb.COMPARE: _no(
            "`{name}` is a serving check of `{version}`: it measures the served model, not an eval contract, so "
            "there is nothing to compare. Compare the run it checked: `/finetune compare {checked}`."
        ),
        Verb.OUTPUTS: _no(
            "`{name}` is a serving check of `{version}`: its report is in the version's thread. The model's "
            "outputs are the run it checked: `/finetune outputs {checked}`."
        ),
        Verb.RESUME: _no(
            "`{name}` is a serving check of `{version}`: it trains nothing, so there is nothing to resume. "
            "To check the version again: `/finetune promote {version} stage={stage}`."
        ),
        Verb.REGISTER: _no(
            "`{name}` is a serving check, not a model: register the run it checked, `{checked}` "
            "(`/finetune register {checked} model=NAME`)."
        ),
        Verb.APPROVE: _no(
            "`{name}` is a serving check of `{version}`: the bot judges its report against the recipe's budgets, "
            "so :{reaction}: approves nothing here. A promotion is approved on its request message: "
            "`/finetune promote {version} stage={stage}` asks for one."
        ),
    },
    RunKind.EVAL: {
        Verb.STATUS: YES,
        Verb.LOGS: YES,
        Verb.STOP: YES,
        Verb.OUTPUTS: YES,
        # An evaluation's numbers are the evaluated run's on its suite (bot.runs.measured): compared as that run.
        Verb.COMPARE: YES,
        Verb.RESUME: _no(
            "`{name}` is an evaluation of `{checked}`: it trains nothing, so there is nothing to resume. "
            "Evaluate again with `/finetune eval {checked}`."
        ),
        Verb.REGISTER: _no(
            "`{name}` is an evaluation, not a model: register the run it evaluated, `{checked}` "
            "(`/finetune register {checked} model=NAME`)."
        ),
        Verb.APPROVE: _no(
            "`{name}` is an evaluation of `{checked}`, not a model, so :{reaction}: approves nothing here. "
            "Register the run it evaluated: `/finetune register {checked} model=NAME`."
        ),
    },
}


@dataclass(frozen=True)
class Shown:
    """What a card and a digest say about a kind of run: how its link to another run reads, and whether it is a
    training run (ranked on its eval contract, labelled non-comparable when not fully pinned)."""

    link: str = ""  # `:emoji: words` before the linked run's name; empty: the link is not told on its card
    trains: bool = True


SHOWN: Mapping[RunKind, Shown] = {
    RunKind.TRAIN: Shown(),
    RunKind.ATTEMPT: Shown(link=":leftwards_arrow_with_hook: resumed from"),  # an attempt of a resumed run
    RunKind.RESUME: Shown(link=":leftwards_arrow_with_hook: resumed from"),
    RunKind.SWEEP: Shown(),
    RunKind.TRIAL: Shown(),
    RunKind.PREFLIGHT: Shown(trains=False),
    RunKind.SERVING: Shown(link=":satellite: checks the version registered from", trains=False),
    RunKind.EVAL: Shown(link=":bar_chart: evaluates", trains=False),
}


def trains(kind: str) -> bool:
    """Whether a stored kind (or a told-apart one) is a training run: ranked, and told non-comparable when unpinned."""
    return SHOWN[RunKind(kind)].trains


def kind_of(run: Run) -> RunKind:
    """The run's kind: its stored kind, with training runs told apart by their links (attempt before resume: an
    attempt of a resumed run is still the run going on)."""
    if run.kind != RunKind.TRAIN:
        return RunKind(run.kind)
    if run.attempt > 1 or run.first_attempt_id is not None:
        return RunKind.ATTEMPT
    if run.parent_run_id is not None:
        return RunKind.RESUME
    return RunKind.TRAIN


def rule_for(kind: RunKind, verb: Verb) -> Rule:
    """The table's rule for one (kind, verb) pair."""
    return KINDS[kind][verb]


def applies(kind: RunKind, verb: Verb) -> bool:
    """Whether the command or button applies to the kind at all (a sweep's own commands included)."""
    return rule_for(kind, verb).applies


def refusal(kind: RunKind, verb: Verb, facts: KindFacts, *, reaction: str = "white_check_mark") -> str | None:
    """What to say when the verb does not apply to this one run (None: it does)."""
    rule = rule_for(kind, verb)
    if rule.as_run:
        return None
    # Every fact is a name from the database or a payload (a reaction's name is the sender's): escaped here, once.
    shown = {field: escape(value) for field, value in asdict(facts).items()}
    return rule.says.format(**shown, reaction=escape(reaction))
