"""What the local shell prints: messages as read, a card edit as one line of what changed, reactions, replies.

Pure parts (`bot.local.messages`) on hand-made messages and on the bot's real status card; the `Printer` on
the Slack stand-in's state, changed by the stand-in's own Web API methods (no server, no bot).
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from bot.forms.fields import FORM_CALLBACK
from bot.local.messages import Names, as_shown, describe_change, describe_edit, lines, message_text, plain
from bot.local.printer import RUN_FORM_OPENED, THREAD_INDENT, Printer
from bot.local.slack import SlackStandIn
from bot.local.slack import chat as chat_api
from bot.local.slack import reactions as reactions_api
from bot.local.slack import streams as streams_api
from bot.local.slack import views as views_api
from bot.local.slack.state import BOT_USER_ID, DEFAULT_CHANNEL
from bot.runs.card import CardView, card_text, render_card
from bot.slack.tables import Cell, Table, table_block

RUN = "sft-tiny-3f2a9c1d7e"


def card(**changes: Any) -> dict[str, Any]:
    """A status card message as the bot renders it."""
    view = CardView(
        **{
            "name": RUN,
            "recipe": "sft-tiny",
            "presets": ["cpu-small"],
            "recipe_presets": ["cpu-small"],
            "requester": "U0ALICE01",
            "pins": {"model": ".finetune/models/tiny-llama@sha256:" + "ab" * 32},
            "status": "submitting",
            **changes,
        }
    )
    return {"ts": "1.000001", "text": card_text(view), "blocks": render_card(view)}


SUBMITTED = {"uuid": "9c1d1234abcd", "polyaxon_url": "http://127.0.0.1:1/ui/default/finetune/runs/9c1d1234abcd"}


def section_message(text: str) -> dict[str, Any]:
    return {
        "ts": "2.000001",
        "text": "fallback",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }


# --- the one-line summary of an edit ---------------------------------------------------------------


def test_a_card_that_succeeded_is_told_in_one_line_of_what_changed() -> None:
    running = card(
        status="running", step=20, max_steps=40, metrics={"loss": 3.91, "learning_rate": 0.0015}, **SUBMITTED
    )
    succeeded = card(
        status="succeeded",
        step=40,
        max_steps=40,
        metrics={"loss": 3.61, "learning_rate": 0.0, "eval_loss": 3.52},
        **SUBMITTED,
    )

    line = describe_edit(running, succeeded)

    assert line is not None and "\n" not in line
    assert line.startswith(f"{RUN}: running → succeeded · step 40/40 · ")
    assert "eval_loss 3.52" in line and "loss 3.61" in line and "learning_rate 0" in line
    assert line.endswith("[Request registration]")  # a button that appears is news
    assert "Requested by" not in line and "pins" not in line  # what did not change is not repeated


def test_a_submitted_card_says_its_polyaxon_run() -> None:
    line = describe_edit(card(), card(status="created", **SUBMITTED))
    assert line == f"{RUN}: submitting → created · run 9c1d1234 · open in Polyaxon · −not submitted yet"


def test_progress_is_told_by_its_label_and_new_value() -> None:
    before = card(status="running", step=5, max_steps=40, metrics={"loss": 4.2}, **SUBMITTED)
    after = card(status="running", step=20, max_steps=40, metrics={"loss": 3.9, "grad_norm": 1.5}, **SUBMITTED)
    assert describe_edit(before, after) == f"{RUN}: step 20/40 · grad_norm 1.5 · loss 3.9"


def test_an_edit_with_nothing_readable_changed_is_none() -> None:
    assert describe_edit(card(), card()) is None
    # Only markup changed: nobody reads a difference.
    assert describe_edit(section_message("*status* `ok`"), section_message("*status* ok")) is None


def test_an_edit_of_a_plain_message_is_told_by_its_first_words() -> None:
    before = section_message("Approval request: register local-demo\n1 approval(s) needed · 0 so far")
    after = section_message("Approval request: register local-demo\n1 approval(s) needed · 1 so far")
    assert describe_edit(before, after) == "Approval request: register loca…: 0 so far → 1 so far"


def test_a_long_edit_is_clipped_to_one_short_line() -> None:
    before = section_message("\n".join(f"metric_{i} `{i}`" for i in range(40)))
    after = section_message("\n".join(f"metric_{i} `{i + 1}`" for i in range(40)))
    line = describe_edit(before, after)
    assert line is not None and len(line) <= 220 and line.endswith("…") and "\n" not in line


@pytest.mark.parametrize(
    ("before", "after", "told"),
    [
        ("running", "succeeded", "running → succeeded"),
        ("step 20/40", "step 40/40", "step 40/40"),
        ("eval_loss 3.52", "eval_loss 3.41", "eval_loss 3.41"),
        ("not submitted yet", "run 9c1d1234", "not submitted yet → run 9c1d1234"),
        ("a b c d e", "v w x y z", "v w x y z"),
    ],
    ids=["bare-word", "labelled-progress", "labelled-metric", "short-phrase", "long-phrase"],
)
def test_describe_change(before: str, after: str, told: str) -> None:
    assert describe_change(before, after) == told


@pytest.mark.parametrize(
    ("mrkdwn", "read"),
    [
        (":runner: *running* · step 20/40 `█████░░░░░`", "running · step 20/40"),
        ("<http://x/ui|open in Polyaxon>", "open in Polyaxon"),
        ("eval_loss &lt;= 10", "eval_loss <= 10"),
        ("snake_case_key `1`", "snake_case_key 1"),
    ],
    ids=["emoji-bold-bar", "link-label", "entities", "underscores-kept"],
)
def test_plain(mrkdwn: str, read: str) -> None:
    assert plain(mrkdwn) == read


NAMES = Names(
    user=lambda user_id: {"U0ALICE01": "alice"}.get(user_id, user_id),
    group=lambda group_id: {"S0APPROVE": "ml-approvers"}.get(group_id, group_id),
    channel=lambda channel_id: {"C0TRAIN01": "ml-training"}.get(channel_id, channel_id),
)


@pytest.mark.parametrize(
    ("mrkdwn", "shown"),
    [
        ("the card is in <#C0TRAIN01>.", "the card is in #ml-training."),
        ("in <#C0OTHER01|ops>", "in #ops"),
        ("<http://x/ui/runs/9c|open in Polyaxon>", "open in Polyaxon (http://x/ui/runs/9c)"),
        ("see <https://x.io/a>", "see https://x.io/a"),
        (
            "<https://x.slack.com/archives/C0TRAIN01/p1796675708710842?thread_ts=1796675707.455383|in its thread>",
            "in its thread [1796675708.710842]",
        ),
        ("<https://x.io|https://x.io>", "https://x.io"),
        ("<mailto:ml@x.io|ml@x.io>", "ml@x.io"),
        ("<@U0ALICE01> and <!subteam^S0APPROVE>, <!here>", "@alice and @ml-approvers, @here"),
        ("since <!date^1700000000^{date_short}|Nov 14>", "since Nov 14"),
        ("lr &lt;= 1 &amp;&amp; &lt;#C0TRAIN01&gt;", "lr <= 1 && <#C0TRAIN01>"),
    ],
    ids=[
        "channel",
        "channel-label",
        "link",
        "bare-link",
        "permalink",
        "link-to-itself",
        "mailto",
        "mentions",
        "date",
        "escaped",
    ],
)
def test_as_shown_reads_slack_entities_as_a_person_does(mrkdwn: str, shown: str) -> None:
    assert as_shown(mrkdwn, NAMES) == shown


def test_an_edit_names_channels_and_people() -> None:
    before = section_message("Waiting · posts in <#C0TRAIN01> for <@U0ALICE01>")
    after = section_message("Approved · posts in <#C0TRAIN01> for <@U0ALICE01>")
    assert describe_edit(before, after, NAMES) == "Approved: Waiting → Approved"
    moved = section_message("Approved · posts in <#C0TRAIN01> for <@U0ALICE01> · <http://x|open in Polyaxon>")
    assert describe_edit(after, moved, NAMES) == "Approved: open in Polyaxon"
    assert lines(moved, NAMES)[0].parts == ("Approved", "posts in #ml-training for @alice", "open in Polyaxon")


def test_message_text_shows_buttons_and_files() -> None:
    message = {
        "text": "fallback",
        "blocks": [
            {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Logs"}}]}
        ],
        "files": [{"name": "log.txt", "title": "log.txt", "size": 12}],
    }
    assert message_text(message) == "[Logs]\n[file log.txt, 12 bytes]"
    assert message_text({"text": "only text"}) == "only text"


def test_message_text_reads_a_table_row_by_row() -> None:
    table = Table(header=["run", "eval_loss"], rows=[[Cell("a", bold=True, emoji="trophy"), Cell("1.5")]])
    message = {"text": "fallback", "blocks": [{"type": "header", "text": {"text": "Compare"}}, table_block(table)]}
    assert message_text(message) == "Compare\nrun · eval_loss\na :trophy: · 1.5"
    assert [line.parts for line in lines(message)][1:] == [("run", "eval_loss"), ("a", "1.5")]


# --- the printer, on the stand-in's state ------------------------------------------------------------


def post(standin: SlackStandIn, message: dict[str, Any], *, thread_ts: str | None = None) -> str:
    with standin.state.lock:
        msg = standin.state.post(
            standin.state.channel(DEFAULT_CHANNEL),
            user=BOT_USER_ID,
            text=message["text"],
            blocks=message["blocks"],
            thread_ts=thread_ts,
        )
    return str(msg["ts"])


def update(standin: SlackStandIn, ts: str, message: dict[str, Any]) -> None:
    args = {"channel": DEFAULT_CHANNEL, "ts": ts, "text": message["text"], "blocks": message["blocks"]}
    with standin.state.lock:
        chat_api.update(standin.state, args)


def test_printer_prints_a_card_once_then_each_edit_as_one_line() -> None:
    standin = SlackStandIn()
    out = io.StringIO()
    printer = Printer(standin, out, viewer="U0ALICE01")
    ts = post(standin, card())
    printer.poll()
    first = out.getvalue()
    assert first.startswith(f"[{ts}] (new) sft-tiny · {RUN}\n") and "[Stop]" in first

    update(standin, ts, card(status="created", **SUBMITTED))
    update(standin, ts, card(status="running", step=20, max_steps=40, **SUBMITTED))
    printer.poll()
    printer.poll()  # nothing new: nothing printed

    edits = out.getvalue()[len(first) :].splitlines()
    change = "submitting → running · step 20/40 · run 9c1d1234 · open in Polyaxon · −not submitted yet"
    assert edits == [f"[{ts}] (edited) {RUN}: {change}"]


def test_printer_shows_thread_posts_reactions_and_private_replies() -> None:
    standin = SlackStandIn()
    out = io.StringIO()
    printer = Printer(standin, out, viewer="U0BOB0001")
    top = post(standin, card())
    reply = post(standin, section_message("Status: *running*"), thread_ts=top)
    printer.poll()
    with standin.state.lock:
        reactions_api.add_reaction(standin.state.channel(DEFAULT_CHANNEL), reply, "white_check_mark", "U0BOB0001")
        reactions_api.add_reaction(standin.state.channel(DEFAULT_CHANNEL), reply, "floppy_disk", BOT_USER_ID)
        standin.state.ephemerals.append(
            {"channel": DEFAULT_CHANNEL, "user": "U0CAROL01", "text": "Only approvers count.", "blocks": None}
        )
    printer.poll()
    with standin.state.lock:
        reactions_api.remove_reaction(standin.state.channel(DEFAULT_CHANNEL), reply, "white_check_mark", "U0BOB0001")
    printer.poll()

    lines = out.getvalue().splitlines()
    assert f"    │ [{reply}] (new) Status: *running*" in lines
    assert lines[-4:] == [
        f"    │ [{reply}] (reaction) +:floppy_disk: finetune-bot",
        f"    │ [{reply}] (reaction) +:white_check_mark: bob",
        "(only carol) Only approvers count.",
        f"    │ [{reply}] (reaction) −:white_check_mark: bob",
    ]


def test_printer_shows_a_streamed_message_as_what_it_grew_by() -> None:
    standin = SlackStandIn()
    out = io.StringIO()
    printer = Printer(standin, out, viewer="U0ALICE01")
    top = post(standin, card())
    recipient = {"recipient_team_id": standin.team_id, "recipient_user_id": "U0ALICE01"}
    with standin.state.lock:
        started = streams_api.start_stream(
            standin.state, {"channel": DEFAULT_CHANNEL, "thread_ts": top, "markdown_text": "**Log**\n", **recipient}
        )
    printer.poll()
    with standin.state.lock:
        streams_api.append_stream(
            standin.state, {"channel": DEFAULT_CHANNEL, "ts": started["ts"], "markdown_text": "step 1\n"}
        )
    printer.poll()
    assert out.getvalue().splitlines()[-1] == f"{THREAD_INDENT}[{started['ts']}] (streamed) step 1"
    printed = out.getvalue()
    printer.poll()
    printer.poll()
    assert out.getvalue() == printed  # it did not grow: nothing printed
    with standin.state.lock:
        streams_api.append_stream(
            standin.state, {"channel": DEFAULT_CHANNEL, "ts": started["ts"], "markdown_text": "\n"}
        )
        streams_api.stop_stream(standin.state, {"channel": DEFAULT_CHANNEL, "ts": started["ts"]})
    printer.poll()
    printer.poll()
    assert out.getvalue() == printed  # a line break, then the stop: still nothing a person would read


def test_printer_shows_the_bots_direct_messages_to_the_viewer_once() -> None:
    standin = SlackStandIn()
    out = io.StringIO()
    printer = Printer(standin, out, viewer="U0ALICE01")
    printer.poll()  # no direct message channel yet: nothing, no error
    with standin.state.lock:
        sent = chat_api.post_message(standin.state, {"channel": "U0ALICE01", "text": "Your run `r` succeeded."})
    printer.poll()
    printer.poll()
    assert out.getvalue() == f"[{sent['ts']}] (direct message to you) Your run `r` succeeded.\n"


def open_modal(standin: SlackStandIn, user: str, view: dict[str, Any]) -> str:
    """A modal the bot opens for `user` (views.open with a trigger of theirs), as Slack shows it; its id."""
    trigger = standin.views.mint_trigger(user)
    with standin.state.lock:
        opened = views_api.views_open(standin.state, {"trigger_id": trigger, "view": view})
    return str(opened["view"]["id"])


MODAL = {
    "type": "modal",
    "title": {"type": "plain_text", "text": "Confirm"},
    "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Sure?"}}],
}
RUN_FORM = {**MODAL, "title": {"type": "plain_text", "text": "Run a recipe"}, "callback_id": FORM_CALLBACK}


def test_a_modal_the_bot_opens_is_told_in_one_line_once() -> None:
    standin = SlackStandIn()
    out = io.StringIO()
    printer = Printer(standin, out, viewer="U0ALICE01")
    open_modal(standin, "U0BOB0001", MODAL)  # someone else's: not the viewer's to see
    printer.poll()
    assert out.getvalue() == ""

    open_modal(standin, "U0ALICE01", RUN_FORM)
    printer.poll()
    printer.poll()
    open_modal(standin, "U0ALICE01", MODAL)
    printer.poll()

    assert out.getvalue().splitlines() == [
        f"» {RUN_FORM_OPENED}",
        "» the bot opened a modal, 'Confirm' (Slack shows it over the channel; the shell cannot)",
    ]
    assert "`form run`" in RUN_FORM_OPENED and "`preview`, `submit` or `cancel`" in RUN_FORM_OPENED


def test_a_modal_the_shell_shows_itself_is_not_told() -> None:
    standin = SlackStandIn()
    out = io.StringIO()
    printer = Printer(standin, out, viewer="U0ALICE01")
    printer.drive_views(True)  # `form run`: the form lists its own fields
    open_modal(standin, "U0ALICE01", RUN_FORM)
    printer.poll()
    printer.drive_views(False)
    printer.poll()
    assert out.getvalue() == ""
