"""Slack-native surfaces through the front door on the real local Polyaxon: the run form starts a run with its
card, a double submission starts one run, App Home lists a person's runs and the approvals waiting for them, and
"Rerun with changes" opens the form prefilled."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bot.forms import form_delivery_key
from bot.forms.admit import NOT_YOURS, TAMPERED
from bot.forms.fields import RECIPE_BLOCK, key_block, presets_block
from bot.local.slack.server import BOT_USER_ID
from bot.local.slack.viewing import submission_payload, view_action_payload
from bot.runs.submit import run_name_for
from handlers.forms import RERUN_CALLBACK
from storage import repos
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]


def open_form(bot: LiveBot, recipe: str, user: str = ALICE) -> dict[str, Any]:
    """`/finetune run`, then pick `recipe`: the form with that recipe's fields."""
    assert bot.sender.slash_command("run", user_id=user, channel_id=CHANNEL).status == 200
    view = wait_for(lambda: bot.standin.views.top(user))
    bot.standin.views.enter(view["id"], RECIPE_BLOCK, recipe)
    assert bot.sender.view_action(view["id"], RECIPE_BLOCK, "finetune_form:recipe").status == 200
    block = presets_block(recipe)
    shown: dict[str, Any] = wait_for(
        lambda: (v := bot.standin.views.top(user)) and any(b.get("block_id") == block for b in v["blocks"]) and v
    )
    return shown


def form_run_name(recipe: str, view: dict[str, Any]) -> str:
    """The name a form's run gets: the recipe and a digest of the view (one form, one run)."""
    return run_name_for(recipe, form_delivery_key(view))


def test_the_form_checks_fields_then_starts_the_run_with_its_card(live_bot: LiveBot) -> None:
    view = open_form(live_bot, "quickstart")
    live_bot.standin.views.enter(view["id"], key_block("quickstart", "lr"), "5")  # lr is float in (0, 1]
    live_bot.standin.views.enter(view["id"], key_block("quickstart", "epochs"), "2")
    _, outcome = live_bot.sender.submit_view(view["id"])
    assert outcome["action"] == "errors" and list(outcome["errors"]) == [key_block("quickstart", "lr")]
    before = len(live_bot.standin.messages(CHANNEL))
    live_bot.standin.views.enter(view["id"], key_block("quickstart", "lr"), "0.1")
    _, outcome = live_bot.sender.submit_view(view["id"])
    assert outcome == {"action": "closed"}
    name = form_run_name("quickstart", view)
    # The ephemeral note comes once the run is recorded (the form's work runs after the ack closed the form).
    wait_for(lambda: [e for e in live_bot.standin.ephemerals(CHANNEL, ALICE) if name in e["text"]], timeout=60)
    run = live_bot.wait_status(name, {"succeeded"}, timeout=180)
    assert run.overrides == {"lr": 0.1, "epochs": 2} and run.requester == ALICE and run.channel == CHANNEL
    assert len(live_bot.standin.messages(CHANNEL)) == before + 1  # one card, as the typed command posts
    live_bot.wait_card(run, "succeeded", "`epochs=2` `lr=0.1`", "Latest metrics")
    [note] = [e for e in live_bot.standin.ephemerals(CHANNEL, ALICE) if name in e["text"]]
    assert "/finetune run recipe=quickstart lr=0.1 epochs=2" in note["text"]  # the command the form stood for


def test_submitting_one_form_twice_starts_one_run(live_bot: LiveBot) -> None:
    view = open_form(live_bot, "quickstart")
    live_bot.standin.views.enter(view["id"], key_block("quickstart", "epochs"), "1")
    with live_bot.standin.state.lock:  # a double click: two submissions of the same view, two trigger ids
        payloads = [submission_payload(live_bot.standin.state, view["id"]) for _ in range(2)]
    assert payloads[0]["trigger_id"] != payloads[1]["trigger_id"]
    with ThreadPoolExecutor(2) as pool:
        statuses = [sent.status for sent in pool.map(live_bot.sender.interactivity, payloads)]
    assert statuses == [200, 200]
    name = form_run_name("quickstart", view)
    notes = wait_for(
        lambda: len(n := [e for e in live_bot.standin.ephemerals(CHANNEL, ALICE) if name in e["text"]]) == 2 and n,
        timeout=60,
    )
    run = live_bot.wait_status(name, {"succeeded"}, timeout=180)
    assert sum("already submitted" in n["text"] for n in notes) == 1
    with live_bot.runtime.services.sessions() as s:
        assert [r.name for r in repos.list_recent_runs(s, limit=100) if r.name == name] == [name]
    assert sum(1 for m in live_bot.standin.messages(CHANNEL) if m["ts"] == run.card_ts) == 1
    live_bot.standin.views.close(ALICE)  # Slack closed the form at the first answer


def test_app_home_lists_my_runs_and_what_waits_for_me(live_bot: LiveBot) -> None:
    done = live_bot.run_named(form_run_name_of_newest_quickstart(live_bot))
    asked = reply_text(live_bot.command(f"register {done.name} model=qs-home", user=ALICE))
    assert "approval request" in asked, asked
    running = run_name_in(live_bot.command("run recipe=quickstart epochs=50", user=ALICE))
    assert live_bot.sender.home_opened(ALICE).status == 200
    home = wait_for(lambda: (h := live_bot.standin.views.home(ALICE)) and running in str(h["blocks"]) and h)
    text = reply_text(home)
    assert "Your active runs (1)" in text and "Nothing to approve." in text
    assert "Your requests, waiting for approvers" in text and "qs-home" in text
    assert live_bot.sender.home_opened(BOB).status == 200
    bob = wait_for(lambda: (h := live_bot.standin.views.home(BOB)) and "qs-home" in str(h["blocks"]) and h)
    assert "Waiting for you (1)" in reply_text(bob) and f"asked by <@{ALICE}>" in reply_text(bob)
    # Stop from the Home tab: the answer opens in a modal, the tab is refreshed.
    [stop] = [
        e
        for b in home["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e.get("value") == f"stop:{running}"
    ]
    block_id = next(b["block_id"] for b in home["blocks"] if stop in b.get("elements", []))
    assert live_bot.sender.view_action(home["id"], block_id, stop["action_id"]).status == 200
    answer = wait_for(
        lambda: (
            (v := live_bot.standin.views.top(ALICE))
            and v["title"]["text"] == "/finetune stop"
            and "Working" not in str(v["blocks"])
            and v
        )
    )
    assert running in reply_text(answer), answer
    live_bot.wait_status(running, {"stopped"}, timeout=120)


def test_rerun_with_changes_opens_the_form_prefilled(live_bot: LiveBot) -> None:
    run = live_bot.run_named(form_run_name_of_newest_quickstart(live_bot))
    assert run.card_ts is not None
    sent = live_bot.sender.message_shortcut(RERUN_CALLBACK, channel_id=CHANNEL, message_ts=run.card_ts, user_id=BOB)
    assert sent.status == 200
    view = wait_for(lambda: live_bot.standin.views.top(BOB))
    fields = {f.block_id: f.value for f in live_bot.standin.views.fields(view["id"])}
    assert fields[RECIPE_BLOCK] == "quickstart"
    for key, value in run.overrides.items():
        assert str(fields[key_block("quickstart", key)]) == str(value)
    assert f"Rerun of `{run.name}`" in str(view["blocks"])
    plain = live_bot.standin.post_as_user(ALICE, CHANNEL, "not a card")
    live_bot.standin.views.close(BOB)
    assert (
        live_bot.sender.message_shortcut(RERUN_CALLBACK, channel_id=CHANNEL, message_ts=plain, user_id=BOB).status
        == 200
    )
    info = wait_for(lambda: live_bot.standin.views.top(BOB))
    assert "works on a run's card" in str(info["blocks"])


def form_run_name_of_newest_quickstart(bot: LiveBot) -> str:
    """The newest succeeded quickstart run started from a form (the first test's)."""
    with bot.runtime.services.sessions() as s:
        runs = [
            r for r in repos.list_recent_runs(s, limit=100) if r.recipe_name == "quickstart" and r.status == "succeeded"
        ]
    assert runs, "the form tests run in order: the first one starts a quickstart run"
    return runs[0].name


# --- issue 35: what the bot wrote into a view or a button comes back untrusted ----------------------------------

SECRET = "C0SECRET1"  # private: bob and the bot, not alice


def run_count(bot: LiveBot) -> int:
    with bot.runtime.services.sessions() as s:
        return len(repos.list_recent_runs(s, limit=1000))


def test_a_forged_form_starts_nothing_and_its_owner_still_starts_hers(live_bot: LiveBot) -> None:
    live_bot.standin.add_channel(SECRET, "secret", members=[BOB, BOT_USER_ID], is_private=True)
    while live_bot.standin.views.top(ALICE):  # the answer an earlier test left open
        live_bot.standin.views.close(ALICE)
    view = open_form(live_bot, "quickstart")
    live_bot.standin.views.enter(view["id"], key_block("quickstart", "epochs"), "1")
    runs, notes = run_count(live_bot), len(live_bot.standin.ephemerals())
    with live_bot.standin.state.lock:
        forged = submission_payload(live_bot.standin.state, view["id"])
        taken = submission_payload(live_bot.standin.state, view["id"])
    # Its channel moved to a private channel alice is not in, the seal kept as it was.
    data = json.loads(forged["view"]["private_metadata"])
    forged["view"]["private_metadata"] = json.dumps({**data, "channel": SECRET})
    sent = live_bot.sender.interactivity(forged)
    assert json.loads(sent.body) == {"response_action": "errors", "errors": {RECIPE_BLOCK: TAMPERED}}
    # Her view, submitted by bob.
    taken["user"] = {**taken["user"], "id": BOB}
    sent = live_bot.sender.interactivity(taken)
    assert json.loads(sent.body) == {"response_action": "errors", "errors": {RECIPE_BLOCK: NOT_YOURS}}
    wait_for(lambda: live_bot.runtime.services.work.in_flight == 0)
    assert run_count(live_bot) == runs and len(live_bot.standin.ephemerals()) == notes
    assert live_bot.standin.messages(SECRET) == []
    # Alice submits her own form: her run starts, requested by her, and it is not "already submitted".
    _, outcome = live_bot.sender.submit_view(view["id"])
    assert outcome == {"action": "closed"}
    name = form_run_name("quickstart", view)
    [note] = wait_for(lambda: [e for e in live_bot.standin.ephemerals(CHANNEL, ALICE) if name in e["text"]], timeout=60)
    assert "already submitted" not in note["text"]
    run = live_bot.wait_status(name, {"succeeded"}, timeout=180)
    assert (run.requester, run.channel) == (ALICE, CHANNEL)


def test_a_forged_home_button_with_command_text_starts_nothing(live_bot: LiveBot) -> None:
    assert live_bot.sender.home_opened(ALICE).status == 200
    home = wait_for(lambda: live_bot.standin.views.home(ALICE))
    runs, posts = run_count(live_bot), len(live_bot.standin.messages(CHANNEL))
    with live_bot.standin.state.lock:
        payload = view_action_payload(live_bot.standin.state, home["id"], "home_actions", "finetune_form:open")
    payload["actions"] = [
        {**payload["actions"][0], "action_id": "finetune_command:home-stop-0", "value": "run recipe=quickstart"}
    ]
    assert live_bot.sender.interactivity(payload).status == 200
    answer = wait_for(
        lambda: (v := live_bot.standin.views.top(ALICE)) and "Working" not in str(v["blocks"]) and v, timeout=30
    )
    assert "This is not a button the bot made" in reply_text(answer)
    wait_for(lambda: live_bot.runtime.services.work.in_flight == 0)
    assert run_count(live_bot) == runs and len(live_bot.standin.messages(CHANNEL)) == posts
    live_bot.standin.views.close(ALICE)
