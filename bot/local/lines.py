"""The lines the local shell understands, who it may act as, and its answers to a line it cannot carry out. Pure.

Every line it refuses is answered with what would work: a number for `wait` and `sleep`, an emoji for a reaction,
`form run` for a form word with no form open, a person it knows for `as`, else the closest line it understands.
"""

from __future__ import annotations

import difflib
import math

from bot.grammar import SUBCOMMANDS

PEOPLE = {"alice": "U0ALICE01", "bob": "U0BOB0001", "carol": "U0CAROL01"}
SHELL_LINES = """\
Lines this shell understands (you are in #ml-training; Slack's answers are printed as they arrive):
    /finetune run recipe=sft-tiny        a slash command, sent as Slack sends it (signed form post);
                                         $RUN in it stands for the newest run's name (for scripts);
                                         `/finetune help` is the bot's own help
    +white_check_mark [TS|last]          a reaction_added (+emoji) on a message (default: the newest one)
    -white_check_mark [TS|last]          a reaction_removed (-emoji)
    form run                             the run form (the modal `/finetune run` opens), filled in here:
                                         KEY=VALUE lines, then `preview`, `submit` or `cancel`
    home                                 your App Home tab, as the bot publishes it when you open it
    step start_finetune_run recipe=sft-tiny channel=#ml-training
                                         a Workflow Builder step (function_executed) run by you, its
                                         completion printed when it comes; request_promotion takes
                                         model_version=MODEL:VERSION stage=staging|production
    as bob                               act as another member of the workspace (alice, bob, carol;
                                         bob and carol approve unless FINETUNE_APPROVERS says otherwise)
    wait [SECONDS]                       wait until no run is active and every preflight reported (default 600 s)
    sleep SECONDS                        pause
    # a comment                          ignored (for scripts)
    help                                 this list
    quit, exit, Ctrl-D or Ctrl-C         stop the bot and the local Polyaxon stack, and leave"""
# The first word of each line above (`/finetune` also read without its slash), and what follows it when typed alone.
SHELL_WORDS = {
    "/finetune": "",
    "finetune": "",
    "form": "run",
    "home": "",
    "step": "start_finetune_run recipe=sft-tiny",
    "as": "bob",
    "wait": "",
    "sleep": "5",
    "help": "",
    "quit": "",
    "exit": "",
}
# What the run form takes once open (`form run`): a form word typed with no form open is told how to open one.
FORM_WORDS = ("preview", "submit", "cancel", "show")
NO_FORM = "no form is open: `form run` opens the run form, then KEY=VALUE lines, `preview`, `submit` or `cancel`"
NO_EMOJI = "a reaction needs an emoji name: `+white_check_mark [TS|last]` adds one, `-white_check_mark` takes it off"


def person(who: str) -> tuple[str, str]:
    """The name and Slack user id of someone the shell may act as (by name or id); ValueError naming who it knows,
    closest first."""
    who = who.strip()
    if not who:
        raise ValueError(f"`as` takes a name: {', '.join(PEOPLE)}")
    if who.lower() in PEOPLE:
        return who.lower(), PEOPLE[who.lower()]
    by_id = {user_id: name for name, user_id in PEOPLE.items()}
    if who in by_id:
        return by_id[who], who
    known = sorted(PEOPLE, key=lambda name: -difflib.SequenceMatcher(None, who.lower(), name).ratio())
    raise ValueError(f"there is no {who!r} in this workspace; the shell acts as {', '.join(known)} (`as {known[0]}`)")


def seconds(word: str | None, *, verb: str, example: str) -> float:
    """A `wait` or `sleep` line's number of seconds; ValueError saying what it takes."""
    what = f"{verb} takes a number of seconds, e.g. `{verb} {example}`"
    if word is None:
        raise ValueError(what)
    try:
        value = float(word)
    except ValueError:
        raise ValueError(what) from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(what)
    return value


def unknown_line(line: str) -> str:
    """The answer to a line the shell does not understand: what it would take instead, or the closest line it
    understands."""
    words = line.split()
    first, rest = words[0], " ".join(words[1:])
    if first.lower() in FORM_WORDS or ("=" in first and not first.startswith("/")):
        return NO_FORM
    if first in ("+", "-"):
        return NO_EMOJI
    # The shell's own words first: `help` is the shell's, `/finetune help` the bot's.
    candidates = {
        **{word: "shell" for word in SHELL_WORDS},
        **{w: "command" for w in SUBCOMMANDS if w not in SHELL_WORDS},
    }
    closest = max(candidates, key=lambda word: difflib.SequenceMatcher(None, first.lower(), word).ratio())
    if candidates[closest] == "command":
        suggestion = f"/finetune {closest} {rest}"
    elif closest in ("/finetune", "finetune"):
        suggestion = f"/finetune {rest}"
    else:
        suggestion = f"{closest} {rest or SHELL_WORDS[closest]}"
    return (
        f"unknown input {line!r}; the closest line this shell understands: `{suggestion.strip()}` (`help` lists them)"
    )
