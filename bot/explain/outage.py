"""What a command or button answers while Polyaxon does not, and what happens next. Pure."""

from __future__ import annotations

from bot.slack.blocks import escape

COMMAND = "/finetune"

# What is not done, per subcommand, where "nothing changed" alone would leave the person guessing.
_NOT_DONE = {
    "stop": "The run was *not* stopped: it goes on running on the cluster.",
    "resume": "No resumed run was started.",
    "register": "No registration request was posted and nothing was registered.",
    "promote": "No stage was changed and no request was posted.",
    "rollback": "No stage was changed.",
    "eval": "No evaluation was started.",
}
# Subcommands that hand their work to a background retry instead (a run waits as pending_submit): never answered so.
_WHAT_NEXT = "Runs already submitted go on; the bot keeps asking Polyaxon and their cards catch up when it answers."


def polyaxon_down_text(subcommand: str, *, host: str, detail: str) -> str:
    """The answer to `/finetune SUBCOMMAND` (typed or a button) that met Polyaxon not answering."""
    done = _NOT_DONE.get(subcommand, "Nothing was changed.")
    return (
        f":warning: Polyaxon at `{escape(host)}` is not answering, so `{COMMAND} {escape(subcommand)}` was not "
        f"carried out. {done} {_WHAT_NEXT} Try `{COMMAND} {escape(subcommand)}` again in a minute.\n"
        f"_What the bot saw: {escape(detail)}_"
    )


def polyaxon_refused_text(subcommand: str, *, detail: str) -> str:
    """The answer to a command Polyaxon answered with an error (not an outage): what it said, nothing changed."""
    done = _NOT_DONE.get(subcommand, "Nothing was changed.")
    return (
        f":x: `{COMMAND} {escape(subcommand)}` was not carried out: {escape(detail)}. {done} "
        "If it happens again, the bot's log has the details (tell the platform team)."
    )
