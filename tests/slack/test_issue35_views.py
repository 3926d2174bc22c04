"""Issue 35 items 1 and 2 through the front door: what the bot wrote into a view or a button comes back untrusted.

The run form's private_metadata is sealed and bound to who opened it; its channel must be one the bot can post in
and the submitter is in; every value is type-checked. Buttons carry an action and a run name, never command text,
and act in the run's own channel. Each forged payload below gets a specific answer and changes nothing: no post,
no ephemeral note, no run (this bot has no Polyaxon: a form that passed would say so in an ephemeral note, which
is how the happy paths show they got through; tests/e2e/test_forms.py starts real runs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sqlmodel import select

from bot.forms.admit import NOT_YOURS, TAMPERED
from bot.forms.fields import CHANNEL_BLOCK, NOT_A_CHANNEL, NOT_TEXT, RECIPE_BLOCK, key_block
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.sender import block_actions_payload
from bot.local.slack.server import BOT_USER_ID, DEFAULT_CHANNEL
from bot.local.slack.viewing import answer_submission, submission_payload, view_action_payload
from storage import repos
from storage.models import AuditEntry, Run
from tests.fixtures.slack import BotServer, wait_for

ALICE, BOB = "U0ALICE01", "U0BOB0001"
SECRET = "C0SECRET1"  # private: bob and the bot, not alice
BOTS = "C0BOTS001"  # public: bob and the bot, not alice
HIDDEN = "C0HIDDEN1"  # private: alice and bob, not the bot
RUN = "sft-tiny-0123456789"

View = dict[str, Any]


@pytest.fixture(autouse=True)
def channels(slack_standin: SlackStandIn) -> None:
    """Channels the forged payloads point at."""
    slack_standin.add_channel(SECRET, "secret", members=[BOB, BOT_USER_ID], is_private=True)
    slack_standin.add_channel(BOTS, "bots", members=[BOB, BOT_USER_ID])
    slack_standin.add_channel(HIDDEN, "hidden", members=[ALICE, BOB], is_private=True)


def traces(standin: SlackStandIn, server: BotServer) -> dict[str, int]:
    """What a refused payload must not change: posts, notes, DMs, response_url answers, runs."""
    with server.services.sessions() as s:
        runs = len(s.exec(select(Run)).all())
    return {
        "posts": len(standin.calls("chat.postMessage")),
        "ephemerals": len(standin.ephemerals()),
        "updates": len(standin.calls("views.update")),
        "runs": runs,
    }


def refusals(server: BotServer, user: str) -> list[AuditEntry]:
    with server.services.sessions() as s:
        return list(s.exec(select(AuditEntry).where(AuditEntry.user == user, AuditEntry.outcome == "refused")).all())


def form_from_command(sender: SlackSender, standin: SlackStandIn, recipe: str = "quickstart") -> View:
    """`/finetune run` in #ml-training as alice, then `recipe` chosen."""
    assert sender.slash_command("run", user_id=ALICE).status == 200
    view: View = wait_for(lambda: standin.views.top(ALICE))
    return choose(sender, standin, view, recipe)


def form_from_home(sender: SlackSender, standin: SlackStandIn, recipe: str = "quickstart") -> View:
    """App Home's New run as alice (the form asks for a channel), then `recipe` chosen."""
    assert sender.home_opened(ALICE).status == 200
    home = wait_for(lambda: standin.views.home(ALICE))
    assert sender.view_action(home["id"], "home_actions", "finetune_form:open").status == 200
    view: View = wait_for(lambda: standin.views.top(ALICE))
    return choose(sender, standin, view, recipe)


def choose(sender: SlackSender, standin: SlackStandIn, view: View, recipe: str) -> View:
    standin.views.enter(view["id"], RECIPE_BLOCK, recipe)
    assert sender.view_action(view["id"], RECIPE_BLOCK, "finetune_form:recipe").status == 200
    lr = key_block(recipe, "lr")
    shown: View = wait_for(
        lambda: (v := standin.views.top(ALICE)) and any(b.get("block_id") == lr for b in v["blocks"]) and v
    )
    return shown


def submit_forged(
    sender: SlackSender, standin: SlackStandIn, view_id: str, forge: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Submit the view with `forge` applied to Slack's payload; Slack's handling of the answer (as submit_view)."""
    with standin.state.lock:
        payload = submission_payload(standin.state, view_id)
    forge(payload)
    sent = sender.interactivity(payload)
    with standin.state.lock:
        return answer_submission(standin.state, view_id, sent.status, sent.body)


def metadata(payload: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(payload["view"]["private_metadata"])
    return loaded


def set_metadata(payload: dict[str, Any], data: object) -> None:
    payload["view"]["private_metadata"] = json.dumps(data)


# --- item 1: the run form ----------------------------------------------------------------------------------------


def _as_bob(payload: dict[str, Any], data: dict[str, Any]) -> None:
    set_metadata(payload, data)
    payload["user"] = {**payload["user"], "id": BOB}


FORGED_METADATA: dict[str, Callable[[dict[str, Any]], None]] = {
    # The first attack: the channel changed to a private one the submitter is not in.
    "channel-changed": lambda p: set_metadata(p, {**metadata(p), "channel": SECRET}),
    # The third: a channel given as a JSON object (it raised ProgrammingError and nobody was answered).
    "channel-as-object": lambda p: set_metadata(p, {**metadata(p), "channel": {"id": DEFAULT_CHANNEL}}),
    # What the bot wrote before the seal: no signature at all.
    "unsigned": lambda p: set_metadata(p, {"channel": SECRET, "origin": "command", "rerun_of": None}),
    # The form made out to someone else, by the one submitting it.
    "opener-changed": lambda p: _as_bob(p, {**metadata(p), "opener": BOB}),
    "not-json": lambda p: p["view"].update(private_metadata="{not json"),
    "a-list": lambda p: set_metadata(p, [DEFAULT_CHANNEL]),
    "field-added": lambda p: set_metadata(p, {**metadata(p), "also": "x"}),
}


@pytest.mark.parametrize("forge", list(FORGED_METADATA.values()), ids=list(FORGED_METADATA))
def test_a_forged_private_metadata_is_refused_and_nothing_is_posted(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, forge: Callable[[dict[str, Any]], None]
) -> None:
    view = form_from_command(sender, slack_standin)
    before = traces(slack_standin, bot_server)
    outcome = submit_forged(sender, slack_standin, view["id"], forge)
    assert outcome == {"action": "errors", "errors": {RECIPE_BLOCK: TAMPERED}}
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert traces(slack_standin, bot_server) == before
    audits = [a for a in refusals(bot_server, ALICE) + refusals(bot_server, BOB) if "(form)" in a.command]
    assert [(a.channel, a.detail) for a in audits] == [(None, "form: private_metadata not the bot's")]
    # The real form is untouched: submitted as Slack sends it, it gets through (to "no Polyaxon" here).
    _, outcome = sender.submit_view(view["id"])
    assert outcome == {"action": "closed"}
    [note] = wait_for(lambda: slack_standin.ephemerals(DEFAULT_CHANNEL, ALICE))
    assert "Polyaxon" in note["text"]


def test_another_persons_view_is_refused_and_its_owner_can_still_submit(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    view = form_from_command(sender, slack_standin)
    before = traces(slack_standin, bot_server)
    with slack_standin.state.lock:
        payload = submission_payload(slack_standin.state, view["id"])
    payload["user"] = {**payload["user"], "id": BOB, "username": "bob", "name": "bob"}
    sent = sender.interactivity(payload)  # bob's submission of alice's view, as the issue sent it
    assert sent.status == 200
    assert json.loads(sent.body) == {"response_action": "errors", "errors": {RECIPE_BLOCK: NOT_YOURS}}
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert traces(slack_standin, bot_server) == before
    assert [a.detail for a in refusals(bot_server, BOB)] == ["form: not its opener"]
    # Bob's choosing a recipe in alice's form re-renders nothing either.
    with slack_standin.state.lock:
        action = view_action_payload(slack_standin.state, view["id"], RECIPE_BLOCK, "finetune_form:recipe")
    action["user"] = {**action["user"], "id": BOB}
    assert sender.interactivity(action).status == 200
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert traces(slack_standin, bot_server) == before
    # Alice's own submission is not "already submitted": it gets through.
    _, outcome = sender.submit_view(view["id"])
    assert outcome == {"action": "closed"}
    [note] = wait_for(lambda: slack_standin.ephemerals(DEFAULT_CHANNEL, ALICE))
    assert "Polyaxon" in note["text"] and not slack_standin.ephemerals(user=BOB)


@pytest.mark.parametrize(
    ("channel", "says"),
    [
        (SECRET, f"You are not in <#{SECRET}>: a run's card goes to a channel you are in"),
        (HIDDEN, f"cannot post its card in <#{HIDDEN}>: the bot cannot see this conversation "
                 "(Slack says `channel_not_found`)"),
        ("C0NOSUCH1", "cannot post its card in <#C0NOSUCH1>: the bot cannot see this conversation"),
        (BOTS, f"You are not in <#{BOTS}>: a run's card goes to a channel you are in"),
        ("D0ALICE01", "this is a direct message"),
        ("#general", NOT_A_CHANNEL),
        ({"id": DEFAULT_CHANNEL}, NOT_A_CHANNEL),
        ([DEFAULT_CHANNEL], NOT_A_CHANNEL),
    ],
    ids=["private-without-me", "private-without-bot", "no-such", "bot-but-not-me", "dm", "a-name", "object", "list"],
)  # fmt: skip
def test_a_channel_chosen_where_the_run_may_not_go_is_an_error_on_the_field(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, channel: object, says: str
) -> None:
    view = form_from_home(sender, slack_standin)
    before = traces(slack_standin, bot_server)

    def forge(payload: dict[str, Any]) -> None:
        values = payload["view"]["state"]["values"]
        values[CHANNEL_BLOCK] = {"value": {"type": "conversations_select", "selected_conversation": channel}}

    outcome = submit_forged(sender, slack_standin, view["id"], forge)
    assert outcome["action"] == "errors" and list(outcome["errors"]) == [CHANNEL_BLOCK]
    assert says in outcome["errors"][CHANNEL_BLOCK]
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert traces(slack_standin, bot_server) == before
    assert bot_server.services.metrics.listener_errors.labels(kind="action")._value.get() == 0


def test_a_channel_in_the_state_of_a_form_opened_in_a_channel_is_not_used(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    view = form_from_command(sender, slack_standin)

    def forge(payload: dict[str, Any]) -> None:
        values = payload["view"]["state"]["values"]
        values[CHANNEL_BLOCK] = {"value": {"type": "conversations_select", "selected_conversation": SECRET}}

    assert submit_forged(sender, slack_standin, view["id"], forge) == {"action": "closed"}
    [note] = wait_for(lambda: slack_standin.ephemerals(user=ALICE))
    assert note["channel"] == DEFAULT_CHANNEL and "Polyaxon" in note["text"]  # where the form was opened
    assert not slack_standin.messages(SECRET)


@pytest.mark.parametrize(
    ("block", "state"),
    [
        (RECIPE_BLOCK, {"finetune_form:recipe": {"type": "static_select", "selected_option": {"value": {"x": 1}}}}),
        (RECIPE_BLOCK, {"finetune_form:recipe": {"type": "static_select", "selected_option": "quickstart"}}),
        (key_block("quickstart", "lr"), {"value": {"type": "plain_text_input", "value": {"lr": 0.1}}}),
        (key_block("quickstart", "epochs"), {"value": {"type": "number_input", "value": 3}}),
        ("presets:quickstart", {"value": {"type": "multi_static_select", "selected_options": [{"value": ["a"]}]}}),
        ("presets:quickstart", {"value": {"type": "multi_static_select", "selected_options": "cpu-small"}}),
    ],
    ids=["recipe-object", "recipe-option-a-string", "lr-object", "epochs-number", "preset-list", "presets-a-string"],
)
def test_a_value_of_the_wrong_type_gets_a_specific_answer_never_an_exception(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, block: str, state: dict[str, Any]
) -> None:
    view = form_from_command(sender, slack_standin)
    before = traces(slack_standin, bot_server)
    outcome = submit_forged(
        sender, slack_standin, view["id"], lambda p: p["view"]["state"]["values"].update({block: state})
    )
    assert outcome == {"action": "errors", "errors": {block: NOT_TEXT}}
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert traces(slack_standin, bot_server) == before
    assert bot_server.services.metrics.listener_errors.labels(kind="action")._value.get() == 0


# --- item 2: buttons -------------------------------------------------------------------------------------------


def alices_run(server: BotServer) -> None:
    with server.services.sessions() as s:
        repos.create_run(s, name=RUN, recipe_name="sft-tiny", recipe_hash="h", requester=ALICE,
                         channel=DEFAULT_CHANNEL, status="running")  # fmt: skip


def click_home(sender: SlackSender, standin: SlackStandIn, label: str, value: object | None = None) -> None:
    """Alice clicks a button of her Home tab, its value forged when `value` is given."""
    assert sender.home_opened(ALICE).status == 200
    home = wait_for(lambda: (h := standin.views.home(ALICE)) and RUN in str(h["blocks"]) and h)
    [(block_id, button)] = [
        (b["block_id"], e) for b in home["blocks"] if b["type"] == "actions" for e in b["elements"]
        if e["text"]["text"] == label
    ]  # fmt: skip
    with standin.state.lock:
        payload = view_action_payload(standin.state, home["id"], block_id, button["action_id"])
    if value is not None:
        payload["actions"][0]["value"] = value
    assert sender.interactivity(payload).status == 200


def modal_answer(standin: SlackStandIn) -> str:
    answer = wait_for(lambda: (v := standin.views.top(ALICE)) and "Working" not in str(v["blocks"]) and v)
    return str(answer["blocks"])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("run recipe=quickstart", "This is not a button the bot made: its value is not an action and a run"),
        ("run:recipe=quickstart", "This is not a button the bot made: `run` is not something a button does"),
        ("stop:<!channel>", "`&lt;!channel&gt;` is not a run name"),
        ({"action": "stop", "run": RUN}, "its value is not an action and a run"),
        ("stop:nosuch-run", "no run 'nosuch-run'"),
    ],
    ids=["command-text", "unknown-action", "markup-as-run", "object", "no-such-run"],
)
def test_a_forged_home_button_is_refused_in_its_modal_and_changes_nothing(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, value: object, says: str
) -> None:
    alices_run(bot_server)
    click_home(sender, slack_standin, "Stop", value)
    text = modal_answer(slack_standin)
    assert says in text, text
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    with bot_server.services.sessions() as s:
        assert [(r.name, r.status) for r in s.exec(select(Run)).all()] == [(RUN, "running")]
        assert [(a.command, a.outcome, a.channel) for a in s.exec(select(AuditEntry)).all()] == [
            ("/finetune (button)", "refused", None)
        ]
    assert not slack_standin.calls("chat.postMessage") and not slack_standin.response_url_posts()


def test_a_home_button_acts_in_its_runs_channel(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    alices_run(bot_server)
    click_home(sender, slack_standin, "Stop")
    assert "`/finetune stop` is not available on this bot" in modal_answer(slack_standin)  # no Polyaxon here
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    with bot_server.services.sessions() as s:
        [audit] = s.exec(select(AuditEntry)).all()
    assert (audit.command, audit.channel) == ("/finetune stop", DEFAULT_CHANNEL)  # not `app_home`


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("run recipe=quickstart", "This is not a button the bot made"),
        ("help", "This is not a button the bot made"),
        ("stop:nosuch-run", "no run 'nosuch-run'"),
        ("stop:", "`` is not a run name"),
        (["stop", RUN], "its value is not an action and a run"),
    ],
    ids=["command-text", "help", "no-such-run", "no-run", "list"],
)
def test_a_forged_card_button_gets_an_ephemeral_answer_and_changes_nothing(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, value: object, says: str
) -> None:
    alices_run(bot_server)
    url = slack_standin.new_response_url(channel=DEFAULT_CHANNEL, user=ALICE)
    payload = block_actions_payload("finetune_command:stop", "", response_url=url, user_id=ALICE)
    payload["actions"][0]["value"] = value  # a card's Stop button, its value forged
    assert sender.interactivity(payload).status == 200
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    assert says in str(post["payload"]["blocks"]) and post["payload"]["response_type"] == "ephemeral"
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    with bot_server.services.sessions() as s:
        assert [(r.name, r.status) for r in s.exec(select(Run)).all()] == [(RUN, "running")]
        assert [a.command for a in s.exec(select(AuditEntry)).all()] == ["/finetune (button)"]
    assert not slack_standin.calls("chat.postMessage") and not slack_standin.messages(DEFAULT_CHANNEL)
