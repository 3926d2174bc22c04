"""The `/finetune` slash command: ack first, then dedupe, parse, act, and reply ephemerally via response_url."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, App

from bot.deliveries import command_key
from bot.explain import (
    polyaxon_down_text,
    polyaxon_refused_text,
    render_command_error,
    render_help,
    render_plan,
    render_presets,
    render_recipes,
)
from bot.grammar import (
    SUBCOMMANDS,
    BudgetCommand,
    Command,
    CommandError,
    CompareCommand,
    DigestCommand,
    EvalCommand,
    HelpCommand,
    LogsCommand,
    OutputsCommand,
    PreflightCommand,
    PresetsCommand,
    PromoteCommand,
    RecipesCommand,
    RegisterCommand,
    ResumeCommand,
    RollbackCommand,
    RunCommand,
    StatusCommand,
    StopCommand,
    SweepCommand,
    TraceCommand,
    UsageCommand,
    parse_command,
    wants_run_form,
)
from bot.polyaxon import GatewayError, PolyaxonUnreachableError, RunGoneError
from bot.redact import redact
from bot.runs.lost import LostRuns, lost_reply
from bot.services import Services
from bot.slack.blocks import escape, is_user_id
from bot.slack.client import post_to_response_url
from bot.slack.views import ViewError
from storage.repos import add_audit

if TYPE_CHECKING:
    from bot.catalog import Catalog

COMMAND = "/finetune"
Blocks = list[dict[str, Any]]

logger = logging.getLogger("finetune_bot.commands")


def register(app: App, services: Services) -> None:
    """Register the `/finetune` listener."""

    @app.command(COMMAND)
    def handle_finetune(ack: Ack, body: dict[str, Any]) -> None:
        # Ack before anything that can be slow (database, catalog, Slack calls): Slack gives 3 s.
        ack()
        services.work.submit(body, lambda: handle_command_delivery(services, body))


def handle_command_delivery(services: Services, body: dict[str, Any]) -> None:
    """After the ack (the front door admitted it once): carry the command out, reply via its response_url."""
    if not is_user_id(body.get("user_id")):
        # Slack always sends a U…/W… id: anything else is forged, and is never mentioned, recorded or acted on.
        logger.warning("command refused: its user_id is not a Slack user id")
        post_to_response_url(str(body["response_url"]), ephemeral(reply_blocks(NOT_A_USER)), services.metrics)
        return
    logger.info("command %s", describe_command(body))
    if services.forms is not None and wants_run_form(str(body.get("text") or "")):
        open_run_form(services, body)
        return
    refusal = place_refusal(services, body)
    if refusal is not None:
        # Refused before anything is recorded (the audit says so): a run the bot cannot post about has no card.
        with services.sessions() as session:
            add_audit(
                session,
                user=str(body.get("user_id")),
                channel=str(body.get("channel_id")),
                command=f"{COMMAND} {_subcommand(body)}",
                outcome="refused",
            )
        post_to_response_url(str(body["response_url"]), ephemeral(reply_blocks(refusal)), services.metrics)
        return
    reply = compose_reply(
        services,
        str(body.get("text") or ""),
        user_id=str(body.get("user_id")),
        channel_id=str(body.get("channel_id")),
        delivery_key=command_key(body),
    )
    post_to_response_url(str(body["response_url"]), reply, services.metrics)


# The answer to a command or button whose user id is not in Slack's shape (the id itself is never shown).
NOT_A_USER = (
    ":no_entry: Refused: this request's user id is not a Slack user id (U… or W…), "
    "so nothing was run, recorded or posted."
)


def open_run_form(services: Services, body: dict[str, Any]) -> None:
    """`/finetune run` alone: the run form, in a modal, for the channel it was typed in."""
    assert services.forms is not None
    user, channel = str(body.get("user_id")), str(body.get("channel_id"))
    try:
        services.forms.open(str(body.get("trigger_id") or ""), user=user, channel=channel, origin="command")
        outcome = "ok"
    except ViewError as exc:
        # A trigger lasts 3 s (a delivery carried out again after a crash comes too late): say how to go on.
        logger.warning("run form not opened: %s", exc)
        text = (
            f":hourglass: The run form could not open in time (Slack said `{escape(exc.error)}`). Type `{COMMAND} run` "
            f"again, or `{COMMAND} run recipe=NAME [KEY=VALUE …]`."
        )
        post_to_response_url(str(body["response_url"]), ephemeral(reply_blocks(text)), services.metrics)
        outcome = "error"
    with services.sessions() as session:
        add_audit(session, user=user, channel=channel, command=f"{COMMAND} run (form)", outcome=outcome)


# Subcommands that post a card, a request or a digest in the channel they are typed in (their dry runs do not).
POSTS_HERE = frozenset({"run", "sweep", "preflight", "promote", "rollback", "register", "resume", "digest", "eval"})


def _subcommand(body: dict[str, Any]) -> str:
    words = str(body.get("text") or "").split()
    return words[0].lower() if words else "help"


def place_refusal(services: Services, body: dict[str, Any]) -> str | None:
    """Why a command that posts here cannot be carried out in its conversation; None when it can (or reads only)."""
    sub = _subcommand(body)
    if sub not in POSTS_HERE or "--dry-run" in str(body.get("text") or "").split():
        return None
    why = services.places.refusal(
        services.slack, channel_id=str(body.get("channel_id") or ""), channel_name=str(body.get("channel_name") or "")
    )
    if why is None:
        return None
    return (
        f":no_entry: `{COMMAND} {sub}` posts in the channel it is typed in, but {why}. Nothing was started. "
        f"Run it in a channel the bot is in, or invite it first: `/invite @finetune-bot` in #your-channel, "
        f"then `{COMMAND} {sub} …` there. `{COMMAND} status`, `usage`, `recipes`, `presets` and `help` work here."
    )


def describe_command(body: dict[str, Any]) -> str:
    """Ids and the subcommand only: never the text (it may hold values), response_url or trigger_id."""
    words = str(body.get("text") or "").split()
    sub = words[0].lower() if words else "help"
    return (
        f"team={body.get('team_id')} user={body.get('user_id')} channel={body.get('channel_id')} "
        f"sub={sub if sub in SUBCOMMANDS else '?'}"
    )


def compose_reply(services: Services, text: str, *, user_id: str, channel_id: str, delivery_key: str) -> dict[str, Any]:
    """Parse and carry out one command text (typed, or from a button); the ephemeral reply.

    `delivery_key` names the Slack delivery: a run started by it is named after it, so a
    retried delivery that slips past the dedupe still cannot start a second run.
    """
    if not is_user_id(user_id):  # a typed command was checked already; a button's clicker is checked here
        return ephemeral(reply_blocks(NOT_A_USER))
    name = "?"
    try:
        command = parse_command(text)
        name = command.name
        blocks = handle_command(services, command, user=user_id, channel=channel_id, delivery_key=delivery_key)
        outcome = "ok"
    except CommandError as err:  # PlanError is a CommandError too: both are the user's to fix
        gone = gone_cause(err)
        blocks = answer_gone(services, gone) if gone is not None else render_command_error(err)
        outcome = "refused"
    except RunGoneError as gone:
        blocks = answer_gone(services, gone)
        outcome = "refused"
    except PolyaxonUnreachableError as down:
        # An outage is not the bot's bug: the person hears it is Polyaxon, what was not done, and what happens next.
        logger.warning("%s: Polyaxon is not answering: %s", name, down)
        blocks = reply_blocks(polyaxon_down_text(name, host=down.host, detail=_said(services, down)))
        outcome = "error"
    except GatewayError as refused:
        logger.warning("%s: Polyaxon refused: %s", name, refused)
        blocks = reply_blocks(polyaxon_refused_text(name, detail=_said(services, refused)))
        outcome = "error"
    with services.sessions() as session:
        # The subcommand only: the full text may carry values nobody should find in an audit log.
        add_audit(session, user=user_id, channel=channel_id, command=f"{COMMAND} {name}", outcome=outcome)
    return ephemeral(blocks)


def _said(services: Services, error: GatewayError) -> str:
    """The gateway's own words, redacted (they can carry a URL with credentials) and kept short."""
    secrets = services.runs.secrets if services.runs is not None else ()
    return redact(str(error), extra_secrets=secrets)[:400]


def gone_cause(err: BaseException) -> RunGoneError | None:
    """The RunGoneError behind a command's error: commands that wrap gateway errors in their own keep it as cause."""
    cause = err.__cause__
    while cause is not None and not isinstance(cause, RunGoneError):
        cause = cause.__cause__
    return cause


def answer_gone(services: Services, gone: RunGoneError) -> Blocks:
    """Every command (typed or a button) that meets a run Polyaxon no longer has: recorded lost once, said so."""
    if services.runs is None:
        return reply_blocks(f":ghost: {escape(str(gone))}")
    run = LostRuns(services.runs.deps, services.runs.thread).record(gone)
    return reply_blocks(lost_reply(run.name if run is not None else gone.uuid, gone.host))


NEEDS_POLYAXON = "it needs Polyaxon, which this bot was started without (POLYAXON_HOST)"


def handle_command(services: Services, command: Command, *, user: str, channel: str, delivery_key: str) -> Blocks:
    """The reply blocks for a parsed command; raises CommandError for the user's mistakes."""
    if isinstance(command, HelpCommand):
        return render_help(command.topic)
    if isinstance(command, RecipesCommand):
        return render_recipes(_catalog(services))
    if isinstance(command, PresetsCommand):
        return render_presets(_catalog(services))
    if isinstance(command, RunCommand) and command.dry_run:
        # A PlanError (unknown recipe, a key the recipe does not declare, …) is a CommandError: the caller replies.
        if services.runs is not None:  # with the smoke-first gate's verdict, which needs the stored preflights
            plan = services.runs.dry_run(command, user=user)
            guess = services.usage.estimate(plan) if services.usage is not None else None
            return render_plan(plan, notes=command.notes, estimate=guess.line() if guess else None)
        return render_plan(_catalog(services).plan(command), notes=command.notes)
    if isinstance(command, DigestCommand):
        if services.digests is None:
            return not_available(command.name, "it needs the scheduler, which this bot was started without")
        return reply_blocks(services.digests.apply(command, channel=channel, user=user))
    if isinstance(command, SweepCommand) and command.dry_run and services.sweeps is None:
        return render_plan(_catalog(services).plan_sweep(command).plan, notes=command.notes)
    if services.runs is None:
        return not_available(command.name, NEEDS_POLYAXON)
    runs = services.runs
    if services.sweeps is not None:
        sweep_reply = handle_sweep_command(services, command, user=user, channel=channel, delivery_key=delivery_key)
        if sweep_reply is not None:
            return sweep_reply
    if isinstance(command, RunCommand):
        if services.registry is None:
            return runs.submit(command, user=user, channel=channel, delivery_key=delivery_key).as_blocks()
        # Skipping a preflight, or going over the channel's budget, is an approval: registration's machinery
        # holds the run until approvers agree.
        return services.registry.submit_run(command, user=user, channel=channel, delivery_key=delivery_key).as_blocks()
    if isinstance(command, UsageCommand | BudgetCommand):
        if services.usage is None:
            return not_available(command.name, NEEDS_POLYAXON)
        if isinstance(command, UsageCommand):
            return services.usage.usage(command, channel=channel).as_blocks()
        return services.usage.budget(command, user=user, channel=channel).as_blocks()
    if isinstance(command, StatusCommand):
        return runs.status(command.run, user=user).as_blocks()
    if isinstance(command, LogsCommand):
        if command.follow:
            if services.follows is None:
                return not_available("logs … follow", NEEDS_POLYAXON)
            return services.follows.follow(command.run, user=user).as_blocks()
        return runs.logs(command.run, lines=command.lines, user=user).as_blocks()
    if isinstance(command, StopCommand):
        return runs.stop(command.run, user=user).as_blocks()
    if isinstance(command, ResumeCommand):
        return runs.resume(command, user=user, channel=channel, delivery_key=delivery_key).as_blocks()
    if isinstance(command, CompareCommand):
        return runs.compare(command, user=user).as_blocks()
    if isinstance(command, OutputsCommand):
        if services.outputs is None:
            return not_available(command.name, NEEDS_POLYAXON)
        return services.outputs.outputs(command.run, user=user).as_blocks()
    if isinstance(command, EvalCommand):
        if services.evals is None:
            return not_available(command.name, NEEDS_POLYAXON)
        return services.evals.start(command, user=user, channel=channel, delivery_key=delivery_key).as_blocks()
    if isinstance(command, PreflightCommand):
        if services.preflights is None:
            return not_available(command.name, NEEDS_POLYAXON)
        return services.preflights.start(command, user=user, channel=channel, delivery_key=delivery_key).as_blocks()
    if isinstance(command, RegisterCommand | TraceCommand):
        if services.registry is None:
            return not_available(command.name, NEEDS_POLYAXON)
        if isinstance(command, RegisterCommand):
            return services.registry.register(command, user=user, channel=channel).as_blocks()
        return services.registry.trace(command).as_blocks()
    if isinstance(command, PromoteCommand | RollbackCommand):
        if services.release is None:
            return not_available(command.name, NEEDS_POLYAXON)
        if isinstance(command, PromoteCommand):
            return services.release.promote(command, user=user, channel=channel, delivery_key=delivery_key).as_blocks()
        return services.release.rollback(command, user=user, channel=channel).as_blocks()
    # Every command of the grammar is handled above; reaching here is a bug, which the error handler reports.
    raise TypeError(f"no handler for {type(command).__name__}")


def handle_sweep_command(
    services: Services, command: Command, *, user: str, channel: str, delivery_key: str
) -> Blocks | None:
    """`sweep`, and `status`/`stop`/`compare` given a whole sweep; None for everything else (a run's commands)."""
    sweeps = services.sweeps
    assert sweeps is not None
    if isinstance(command, SweepCommand):
        if command.dry_run:
            return sweeps.dry_run(command, user=user)
        if services.usage is not None and services.registry is not None and services.usage.has_budget(channel):
            # A sweep over the channel's budget (its estimate × trials) is held like a run, for an approver.
            sweep_plan = sweeps.plan(command)
            verdict = services.usage.verdict(sweep_plan.plan, channel=channel, trials=sweep_plan.trials)
            if verdict.over:
                held, run = sweeps.submit(command, user=user, channel=channel, delivery_key=delivery_key, hold=True)
                if run is None:  # the same delivery again
                    return held.as_blocks()
                return services.registry.budget_holds.ask(run, verdict, user=user).as_blocks()
        return sweeps.submit(command, user=user, channel=channel, delivery_key=delivery_key)[0].as_blocks()
    if isinstance(command, StatusCommand) and command.run is not None:
        sweep = sweeps.find(command.run)
        return sweeps.status(sweep).as_blocks() if sweep is not None else None
    if isinstance(command, StopCommand):
        sweep = sweeps.find(command.run)
        return sweeps.stop(sweep, user=user).as_blocks() if sweep is not None else None
    if isinstance(command, CompareCommand) and len(command.runs) == 1:
        sweep = sweeps.find(command.runs[0])
        if sweep is not None:
            return sweeps.compare(sweep, command, user=user).as_blocks()
    if isinstance(command, CompareCommand) and command.top is not None:
        raise CommandError("top=N picks the best trials of a sweep; name a sweep, or list the runs to compare")
    if isinstance(command, LogsCommand | OutputsCommand | ResumeCommand | RegisterCommand):
        sweeps.refuse_whole_sweep(command.run, command.name)
    return None


def reply_blocks(text: str) -> Blocks:
    """One mrkdwn section."""
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]


def not_available(subcommand: str, why: str) -> Blocks:
    """The reply for a subcommand this bot cannot carry out, and why."""
    return reply_blocks(
        f":construction: `{COMMAND} {subcommand}` is not available on this bot: {why}. "
        f"`{COMMAND} run … --dry-run`, `{COMMAND} recipes`, `{COMMAND} presets` and `{COMMAND} help` always work."
    )


def _catalog(services: Services) -> Catalog:
    if services.catalog is None:
        raise CommandError("no catalog is loaded on this bot (FINETUNE_CATALOG_DIR); ask its maintainers")
    return services.catalog


def ephemeral(blocks: Blocks) -> dict[str, Any]:
    """A response_url body that only the requester sees and that leaves the original message alone."""
    return {"response_type": "ephemeral", "replace_original": False, "text": fallback_text(blocks), "blocks": blocks}


def fallback_text(blocks: Blocks) -> str:
    """Notification text for blocks: the first header or section text, shortened."""
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict) and text.get("text"):
            return str(text["text"])[:300]
    return "finetune-bot"
