"""What a streamed log says, pure: its heading, its lines cut into chunks Slack takes, and why it stopped."""

from __future__ import annotations

from enum import StrEnum

from bot.slack.streams import MAX_MARKDOWN_CHARS

FENCE = "```"
# A fenced block per chunk: its fences and newlines count against the chunk's characters.
_FENCE_COST = len(FENCE) * 2 + 3


class Ending(StrEnum):
    """Why a follow stopped streaming (the closing line says it)."""

    ENDED = "ended"  # the run reached a terminal status other than stopped
    STOPPED = "stopped"  # someone stopped the run
    LIMIT = "limit"  # ten minutes passed
    GONE = "gone"  # Polyaxon no longer has the run
    REFUSED = "refused"  # Slack refused to stream further


def heading(run_name: str, *, resumed: bool = False, minutes: int = 10) -> str:
    """The stream's first line."""
    if resumed:
        return f"**Log of `{run_name}`, continued**\n"
    return f"**Log of `{run_name}`**, streamed until the run ends ({minutes} minutes at most)\n"


def skipped_line(skipped: int, run_name: str) -> str:
    """Said before the first lines when the log already held more than the follow shows."""
    noun = "line" if skipped == 1 else "lines"
    return f"_{skipped} earlier {noun} not shown: `/finetune logs {run_name} lines=N` posts them_\n"


def log_chunks(lines: list[str], *, limit: int = MAX_MARKDOWN_CHARS) -> list[tuple[str, int]]:
    """Redacted lines as fenced blocks of at most `limit` characters each, with how many lines each holds.

    A line that alone exceeds a chunk is cut (a job's one-line progress bar can be megabytes); a fence inside a
    line is broken so that it cannot end the block early.
    """
    room = limit - _FENCE_COST
    chunks: list[tuple[str, int]] = []
    body: list[str] = []
    size = 0
    for raw in lines:
        line = raw.replace(FENCE, "`\u200b``")
        if len(line) > room:
            line = line[: room - 1] + "…"
        if body and size + len(line) + 1 > room:
            chunks.append((_fenced(body), len(body)))
            body, size = [], 0
        body.append(line)
        size += len(line) + 1
    if body:
        chunks.append((_fenced(body), len(body)))
    return chunks


def _fenced(body: list[str]) -> str:
    return f"{FENCE}\n" + "\n".join(body) + f"\n{FENCE}\n"


def closing(ending: Ending, *, run_name: str, status: str | None = None, detail: str | None = None) -> str:
    """The last line of a follow: why it stopped, and how to go on where that makes sense."""
    again = f"`/finetune logs {run_name} follow`"
    if ending is Ending.ENDED:
        return f":checkered_flag: The run ended with status **{status}**."
    if ending is Ending.STOPPED:
        return ":octagonal_sign: The run was stopped."
    if ending is Ending.LIMIT:
        return f":hourglass: 10-minute limit reached; {again} again to keep following."
    if ending is Ending.GONE:
        return ":ghost: Polyaxon no longer has this run; nothing more will come."
    return f":warning: Slack refused to stream more ({detail}); {again} again to start a new stream."


UNREACHABLE = ":warning: Polyaxon unreachable, retrying…\n"
REACHABLE = "_Polyaxon answers again._\n"
CONTINUED = "\n_…continued in the next message._"
RESTARTED = "\n_…the follower stopped; continued in the next message._"
