"""The run form through the front door (no Polyaxon here: the checks and views; tests/e2e/test_forms.py starts runs).

`/finetune run` opens a modal (views.open with the command's trigger), choosing a recipe shows its fields
(block_actions → views.update), Preview pushes the plan, and a submission answers errors per field.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.forms.fields import CHANNEL_BLOCK, RECIPE_BLOCK, key_block, presets_block
from bot.forms.render import FORM_TITLE
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from storage import repos
from tests.fixtures.slack import BotServer, wait_for

ALICE = "U0ALICE01"


def open_form(sender: SlackSender, standin: SlackStandIn, user: str = ALICE) -> dict[str, Any]:
    """Type `/finetune run` and wait for the modal."""
    assert sender.slash_command("run", user_id=user).status == 200
    view: dict[str, Any] = wait_for(lambda: standin.views.top(user))
    return view


def choose_recipe(sender: SlackSender, standin: SlackStandIn, view: dict[str, Any], recipe: str) -> dict[str, Any]:
    """Pick a recipe in the select (it dispatches an action) and wait for the form to show its fields."""
    standin.views.enter(view["id"], RECIPE_BLOCK, recipe)
    assert sender.view_action(view["id"], RECIPE_BLOCK, "finetune_form:recipe").status == 200
    block = presets_block(recipe)
    updated: dict[str, Any] = wait_for(
        lambda: (v := standin.views.top(ALICE)) and any(b.get("block_id") == block for b in v["blocks"]) and v
    )
    return updated


def test_run_alone_opens_the_form_with_every_recipe(sender: SlackSender, slack_standin: SlackStandIn) -> None:
    view = open_form(sender, slack_standin)
    assert view["title"]["text"] == FORM_TITLE and view["submit"]["text"] == "Start run"
    assert '"channel": "C0TRAIN01"' in view["private_metadata"]  # it remembers where it came from
    [recipe_field] = slack_standin.views.fields(view["id"])  # nothing but the recipe until one is chosen
    assert recipe_field.block_id == RECIPE_BLOCK and recipe_field.dispatch
    assert {"sft-tiny", "sft-lora", "quickstart"} <= set(recipe_field.choices)
    assert not slack_standin.response_url_posts()  # the form is the answer: no ephemeral usage error


def test_choosing_a_recipe_shows_its_typed_fields_with_defaults_and_bounds(
    sender: SlackSender, slack_standin: SlackStandIn
) -> None:
    view = choose_recipe(sender, slack_standin, open_form(sender, slack_standin), "sft-tiny")
    fields = {f.block_id: f for f in slack_standin.views.fields(view["id"])}
    lr = fields[key_block("sft-tiny", "lr")]
    assert lr.kind == "plain_text_input" and lr.value == "0.003" and "float in (0, 0.01]" in lr.hint
    steps = fields[key_block("sft-tiny", "max_steps")]
    assert steps.kind == "number_input" and steps.value == "40" and "int 1..500" in steps.hint
    scheduler = fields[key_block("sft-tiny", "scheduler")]
    assert scheduler.kind == "static_select" and "cosine" in scheduler.choices
    presets = fields[presets_block("sft-tiny")]
    assert presets.value == ["cpu-small"] and "gpu-1x" in presets.choices
    assert "ddp-2x8" not in presets.choices  # pytorchjob presets do not fit the job component


def test_a_bad_value_gets_a_per_field_error_and_changes_nothing(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    view = choose_recipe(sender, slack_standin, open_form(sender, slack_standin), "sft-tiny")
    slack_standin.views.enter(view["id"], key_block("sft-tiny", "lr"), "0.5")
    slack_standin.views.enter(view["id"], key_block("sft-tiny", "scheduler"), "cosine")
    sent, outcome = sender.submit_view(view["id"])
    assert sent.status == 200 and outcome["action"] == "errors"
    assert set(outcome["errors"]) == {key_block("sft-tiny", "lr")}
    assert "out of bounds" in outcome["errors"][key_block("sft-tiny", "lr")]
    assert slack_standin.views.top(ALICE) is not None  # the form stays open, with the error under the field
    [field] = [f for f in slack_standin.views.fields(view["id"]) if f.error]
    assert field.block_id == key_block("sft-tiny", "lr")
    with bot_server.services.sessions() as s:
        assert not repos.list_recent_runs(s)
        [audit] = [a for a in repos.list_audit(s, user=ALICE) if a.outcome == "refused"]
    assert (audit.command, audit.outcome) == ("/finetune run (form)", "refused")
    assert audit.detail == f"fields: {key_block('sft-tiny', 'lr')}" and "0.5" not in str(audit.detail)


@pytest.mark.parametrize(
    ("presets", "needle"),
    [(["gpu-1x", "cpu-large"], "both set resources")],
    ids=["two-resource-presets"],
)
def test_conflicting_presets_are_an_error_on_the_presets_field(
    sender: SlackSender, slack_standin: SlackStandIn, presets: list[str], needle: str
) -> None:
    view = choose_recipe(sender, slack_standin, open_form(sender, slack_standin), "sft-tiny")
    slack_standin.views.enter(view["id"], presets_block("sft-tiny"), presets)
    _, outcome = sender.submit_view(view["id"])
    assert outcome["action"] == "errors" and needle in outcome["errors"][presets_block("sft-tiny")]


def test_submitting_without_a_recipe_asks_for_one(sender: SlackSender, slack_standin: SlackStandIn) -> None:
    view = open_form(sender, slack_standin)
    _, outcome = sender.submit_view(view["id"])
    assert outcome == {"action": "errors", "errors": {RECIPE_BLOCK: "Choose a recipe."}}


def test_preview_pushes_the_plan_over_the_form(sender: SlackSender, slack_standin: SlackStandIn) -> None:
    # quickstart: no local model to build (sft-tiny's preview says how to build it; the e2e tests have it)
    view = choose_recipe(sender, slack_standin, open_form(sender, slack_standin), "quickstart")
    slack_standin.views.enter(view["id"], key_block("quickstart", "lr"), "1e-3")
    assert sender.view_action(view["id"], "form_actions", "finetune_form:preview").status == 200
    stack = wait_for(lambda: len(s := slack_standin.views.open_views(ALICE)) == 2 and s)
    preview = str(stack[-1]["blocks"])
    assert stack[-1]["title"]["text"] == "Preview" and stack[-1]["previous_view_id"] == view["id"]
    assert "Plan: quickstart" in preview and "Pins" in preview and "Resources" in preview
    assert "`lr` = 0.001" in preview  # the value entered, with its provenance
    slack_standin.views.close(ALICE)  # Back: the form is still there, as filled in
    assert slack_standin.views.top(ALICE)["id"] == view["id"]  # type: ignore[index]


def test_without_polyaxon_a_valid_form_says_so_in_the_channel(sender: SlackSender, slack_standin: SlackStandIn) -> None:
    view = choose_recipe(sender, slack_standin, open_form(sender, slack_standin), "quickstart")
    _, outcome = sender.submit_view(view["id"])
    assert outcome == {"action": "closed"} and slack_standin.views.top(ALICE) is None
    [note] = wait_for(lambda: slack_standin.ephemerals(DEFAULT_CHANNEL, ALICE))
    assert "Polyaxon" in note["text"]


def test_the_home_tab_new_run_asks_for_a_channel(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    assert sender.home_opened(ALICE).status == 200
    home = wait_for(lambda: slack_standin.views.home(ALICE))
    assert "New run" in str(home["blocks"]) and "Your active runs (0)" in str(home["blocks"])
    assert sender.view_action(home["id"], "home_actions", "finetune_form:open").status == 200
    view = wait_for(lambda: slack_standin.views.top(ALICE))
    assert CHANNEL_BLOCK in {f.block_id for f in slack_standin.views.fields(view["id"])}
    view = choose_recipe(sender, slack_standin, view, "quickstart")
    _, outcome = sender.submit_view(view["id"])
    assert outcome["action"] == "errors" and CHANNEL_BLOCK in outcome["errors"]
    slack_standin.views.enter(view["id"], CHANNEL_BLOCK, "C0GENERAL")  # the bot is not in #general
    _, outcome = sender.submit_view(view["id"])
    # The commands' own posting check (bot.slack.places) says why.
    assert outcome["action"] == "errors"
    assert "cannot post its card in <#C0GENERAL>: the bot is not a member" in outcome["errors"][CHANNEL_BLOCK]
    slack_standin.views.enter(view["id"], CHANNEL_BLOCK, DEFAULT_CHANNEL)  # the bot and alice are in it
    _, outcome = sender.submit_view(view["id"])
    assert outcome == {"action": "closed"}
    [note] = wait_for(lambda: slack_standin.ephemerals(DEFAULT_CHANNEL, ALICE))
    assert "Polyaxon" in note["text"]  # no Polyaxon here: the run would have started


@pytest.mark.parametrize(
    ("kind", "body", "work"),
    [
        ("action", {"type": "view_submission", "view": {"id": "V1"}}, "handle_submission_delivery"),
        ("action", {"type": "message_action", "callback_id": "finetune_rerun"}, "handle_shortcut_delivery"),
        (
            "action",
            {"type": "block_actions", "actions": [{"action_id": "finetune_form:recipe"}]},
            "handle_form_action_delivery",
        ),
        (
            "action",
            {"type": "block_actions", "actions": [{"action_id": "finetune_command:logs"}]},
            "handle_button_delivery",
        ),
        ("event", {"type": "event_callback", "event": {"type": "app_home_opened"}}, "handle_home_delivery"),
        ("event", {"type": "event_callback", "event": {"type": "reaction_added"}}, "handle_reaction_delivery"),
        ("command", {"command": "/finetune"}, "handle_command_delivery"),
    ],
    ids=["submission", "shortcut", "form-action", "button", "home", "reaction", "command"],
)
def test_a_delivery_a_dead_process_left_is_carried_out_by_its_own_work(
    kind: str, body: dict[str, Any], work: str
) -> None:
    from handlers.deliveries import work_for

    found = work_for(kind, body)
    assert found is not None and found.__name__ == work
