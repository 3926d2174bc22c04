"""Help and usage: what each subcommand does, and the reply to a command the user got wrong."""

from __future__ import annotations

from typing import Any

from bot.grammar import CommandError
from bot.slack.blocks import context, escape, header, section, sections

THREAD_NOTE = (
    "Slash commands are not available inside Slack threads: use the buttons on a run's status card "
    "(logs, stop, resume, compare, register) for actions in its thread."
)

USAGE: dict[str, str] = {
    "run": (
        "/finetune run recipe=NAME [preset=P[,P2…]] [dataset=NAME] [rewards=F1,F2] [base=RUN] "
        "[notify=thread|dm|both] [KEY=VALUE …] [--dry-run] [--force] [--skip-preflight]"
    ),
    "status": "/finetune status [RUN]",
    "logs": "/finetune logs RUN [lines=N] | logs RUN follow",
    "compare": "/finetune compare RUN RUN… [metric=NAME] [--exploratory] | compare SWEEP [top=N]",
    "stop": "/finetune stop RUN",
    "resume": "/finetune resume RUN [checkpoint=latest|step-N] [max_steps=N]",
    "outputs": "/finetune outputs RUN",
    "eval": "/finetune eval RUN|MODEL:VERSION [suite=NAME]",
    "preflight": "/finetune preflight recipe=NAME [preset=P[,P2…]] [KEY=VALUE …]",
    "sweep": (
        "/finetune sweep recipe=NAME [preset=P,…] KEY=V1,V2,… [KEY=uniform(a,b)|loguniform(a,b)|choice(a,b,…)] "
        "[mode=grid|random] [trials=N] [concurrency=K] [sampler_seed=S] [KEY=VALUE …] [--dry-run]"
    ),
    "register": "/finetune register RUN model=NAME [version=V]",
    "recipes": "/finetune recipes",
    "presets": "/finetune presets",
    "digest": "/finetune digest (daily HH:MM | weekly DAY HH:MM | off | now) [TZ]",
    "trace": "/finetune trace MODEL[:VERSION]",
    "promote": "/finetune promote MODEL:VERSION stage=staging|production",
    "rollback": "/finetune rollback MODEL stage=staging|production",
    "usage": "/finetune usage [period=week|month] [by=user|recipe|preset]",
    "budget": "/finetune budget [set HOURS per=week|month | off]",
    "help": "/finetune help [SUBCOMMAND]",
}

HELP: dict[str, str] = {
    "run": (
        "Start a training run from a recipe (`/finetune run` alone opens a form with the same fields). "
        "The recipe fixes the model, data, code and image (pinned) "
        "and says which training keys you may override, with their types and bounds; presets choose "
        "the cluster settings (resources, placement, queue) and stack in order, e.g. `preset=gpu-1x,spot`. "
        "Cluster keys such as `gpus=` or `nodeSelector=` are refused as overrides: pick a preset. "
        "`--dry-run` shows the compiled plan (pins, params and where each came from, resources, eval "
        "contract hash, memory estimate, warnings) without submitting anything. `--force` submits a run "
        "whose memory estimate does not fit its presets; only approvers may use it (on a run that fits, it changes "
        "nothing: the run goes ahead and its thread says `--force` was not needed). A distributed recipe "
        "(several workers) is refused until `/finetune preflight` of the same recipe, pins and presets has "
        "passed; with `--skip-preflight` an approver asks to run it without one: the run is held until other "
        "approvers approve with the approval emoji on the request in its thread, then runs unvalidated. "
        "Recipe and preset names are read lower-case; an int key takes a whole number written as one (`seed=1000`, not "
        "`1e3`); values are plain words, never shell syntax. `resume_from` is set only by "
        "`/finetune resume`. Values with spaces go in quotes. A recipe trains with one TRL trainer (SFT, DPO, KTO, "
        "a reward model, GRPO or RLOO); where it allows it, `dataset=NAME` picks another of the catalog's datasets, "
        "which must be in the format that trainer takes (a path or URL never is), and GRPO and RLOO recipes take "
        "`rewards=F1,F2` from the catalog's reward functions (`format`, `length`, `exact-match`). `base=RUN` starts "
        "from a succeeded run's final model (DPO on an SFT run's result, say) once `/finetune outputs RUN` has "
        "confirmed it; the run pins that model by its digest. `notify=dm` sends you a direct message when the run "
        "ends or may be stuck, instead of the mention in its thread; `notify=both` does both, `notify=thread` only "
        "mentions (without it: your App Home default, else the thread).\n"
        "Example: `/finetune run recipe=sft-tiny lr=3e-3 preset=cpu-small --dry-run`"
    ),
    "status": (
        "Show a run's status card, or without RUN the active runs of this channel. RUN is a run uuid, "
        "its first 8 characters, or a run name; a part of a name that begins several runs' names (a recipe's "
        "name) is ambiguous, and the reply lists the runs it could be."
    ),
    "logs": (
        "Post the last N log lines of a run (default 50, at most 1000) in its thread, secrets redacted. "
        "`logs RUN follow` streams the log into the run's thread as one growing message (its last lines first, "
        "then each new line, secrets redacted) until the run ends or for 10 minutes at most; one follow per run "
        "at a time: asked again while it streams, the reply links to the stream."
    ),
    "compare": (
        "Compare two or more runs on one metric (default: the eval contract's first metric): a table and a "
        "plot in the thread. Runs must share one eval contract; runs labelled non-comparable (exploration) "
        "are refused unless you add `--exploratory`. Given a sweep, compares its best N trials (`top=N`, default 3)."
    ),
    "stop": "Stop a running run; it keeps its metrics and last checkpoint.",
    "resume": (
        "Continue a stopped or failed run from its latest checkpoint, or from `checkpoint=step-N`. "
        "`max_steps=N` extends the schedule of a succeeded run to N steps in all, so it trains further."
    ),
    "outputs": (
        "Read back what a run wrote to its output storage and check it: each checkpoint (step, size, files, "
        "content digest, complete or partial), the eval results, the final model folder and the logs, with "
        "the command line that fetches each. Digests the trainer recorded must match the store; a run whose "
        "outputs check out is marked confirmed on its card. The eval results are attached in the thread."
    ),
    "eval": (
        "Evaluate a succeeded run's final model (confirmed by `/finetune outputs RUN`), or a registered "
        "`MODEL:VERSION`, on an lm-evaluation-harness suite of the catalog: the recipe's own by default, or "
        "`suite=NAME`. It runs as a run of kind eval whose card goes in the evaluated run's thread; its results "
        "are comparable with every run on the same suite (same harness version, task versions and data), and "
        "registration and promotion criteria may cite them.\n"
        "Example: `/finetune eval sft-tiny-lmeval-1a2b3c4d suite=tiny`"
    ),
    "preflight": (
        "Validate a distributed recipe before its real run, with the same pins and presets: a short job "
        "that checks the memory estimate against the preset and the measured peak, an all-reduce across "
        "every worker, checkpoint recovery (train, checkpoint, kill the workers, resume: losses must equal "
        "an uninterrupted run's, a partial checkpoint skipped) and that the launcher really distributes. "
        "The report goes in the thread of its card; a pass unlocks `/finetune run` of that recipe."
    ),
    "sweep": (
        "Search a recipe's training keys as one Polyaxon matrix: a grid over listed values (`lr=1e-3,3e-3`), or "
        "`mode=random trials=N` sampling `uniform(a,b)`, `loguniform(a,b)` or `choice(a,b,…)` (`sampler_seed=S` "
        "makes the sample repeatable; without it the same command samples the same trials). Only the recipe's "
        "overridable keys can be swept, every value checked against their types and bounds first; a grid over "
        "100 trials needs `trials=N` to cap it. A sweep waits for one confirmed run of the same pins (`run`, then "
        "`outputs`). One card and one leaderboard (edited in place, ranked by the eval contract's first metric) "
        "follow it; it stops itself after 3 failed trials in a row or when a trial reaches the recipe's target. "
        "`stop`, `status` and `compare SWEEP top=N` work on the whole sweep; `logs`, `outputs` and `register` on "
        "one of its trials.\n"
        "Example: `/finetune sweep recipe=quickstart lr=0.01,0.05,0.1 concurrency=2`"
    ),
    "register": (
        "Ask to register a run's model as a version in the registry. The bot posts an approval request "
        "with the criteria and their evidence; approvers react with the approval emoji on that message "
        "(not the requester); a quorum registers the version."
    ),
    "recipes": "List the recipes: what each trains, its component, default presets and overridable keys.",
    "presets": "List the presets: the cluster settings each adds. Presets stack in the order you give them.",
    "digest": (
        "Schedule this channel's digest of finished, failed, stuck and awaiting-decision runs: "
        "`daily 09:00`, `weekly mon 09:00`, optionally with a time zone (`Europe/Berlin`, default UTC); "
        "`off` stops it, `now` posts one immediately."
    ),
    "trace": (
        "Trace a registered model version back to its run, recipe, pins, data and eval results, with every stage "
        "change, its serving check and its approvers."
    ),
    "promote": (
        "Move a registered version to `staging` or `production`. The bot first runs the serving check of the "
        "recipe's `serving:` section (loads the checkpoint as the server would, runs the pinned prompt set, "
        "measures load time, memory, tokens/s and latency) or reuses a passed one of the same version and prompt "
        "set, posts its report in the version's thread, then an approval request with the model's promotion "
        "criteria. Approvers (not the requester) approve with the approval emoji on it; at the stage's quorum the "
        "version's stage moves in Polyaxon and the release webhook is signed and sent. Production only from "
        "staging.\n"
        "Example: `/finetune promote tiny-chat:v1 stage=staging`"
    ),
    "rollback": (
        "Move a stage back to the version that held it before (approvers only, audited; no serving check, as "
        "that version held the stage already). The version rolled back is disabled."
    ),
    "usage": (
        "Show this channel's accelerator-hours for the week or month so far, by user, recipe or preset: time in "
        "running × accelerators × replicas from each run's recorded status times (CPU presets count core-hours), "
        "retries and preflights included, a run that spans the period's start counted from it, and the cost "
        "where the platform set a price."
    ),
    "budget": (
        "Show the channel's accelerator-hour budget and what is spent of it; `budget set 200 per=week` sets it "
        "(approvers only, audited), `budget off` removes it. A run or sweep whose estimate would take the period "
        "over the budget is held until an approver approves it with the approval emoji (registration's rules); "
        "the channel is told once when 80 % is spent."
    ),
    "help": "Show help for every subcommand, or for one: `/finetune help run`.",
}


def render_help(topic: str | None) -> list[dict[str, Any]]:
    """Help for one subcommand, or for all of them; mentions that slash commands do not work in threads."""
    if topic in HELP:
        assert topic is not None
        return [
            header(f"/finetune {topic}"),
            section(f"`{USAGE[topic]}`\n{escape(HELP[topic])}"),
            context(THREAD_NOTE),
        ]
    lines = [f"• `{USAGE[name]}` — {escape(HELP[name].split('. ')[0].rstrip('.'))}." for name in USAGE]
    return [
        header("/finetune"),
        *sections("", lines),
        context("`/finetune help SUBCOMMAND` for details. " + THREAD_NOTE),
    ]


def render_command_error(err: CommandError) -> list[dict[str, Any]]:
    """A short reply for a user error: the message, the closest valid names, a pointer to help."""
    blocks: list[dict[str, Any]] = [section(f":x: {err.message if err.mrkdwn else escape(err.message)}")]
    hints = []
    if err.suggestions:
        hints.append("Did you mean " + ", ".join(f"`{escape(s)}`" for s in err.suggestions[:5]) + "?")
    hints.append("See `/finetune help`.")
    blocks.append(context(*hints))
    return blocks
