"""The TensorFlow quick start through the front door on the real local Polyaxon: `run recipe=quickstart-tf`
reaches succeeded with accuracy on its card, its Keras model loads back and scores what the run reported, and
it works where `quickstart` works (outputs, compare; a sweep over lr and register in the slow test)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Run
from tests.e2e.conftest import ALICE, BOB, CHANNEL, LiveBot, reply_text
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]


def held_out() -> tuple[np.ndarray, np.ndarray]:
    """The component's held-out set: the same fixed generator, the last 512 examples."""
    x = np.random.RandomState(20240917).standard_normal((2048 + 512, 16)).astype("float32")
    y = (x[:, :4].sum(axis=1) > 0).astype("int32")
    return x[2048:], y[2048:]


def test_quickstart_tf_succeeds_with_accuracy_on_its_card_and_its_model_loads_with_keras(
    live_bot: LiveBot, polyaxon_stack: LocalPolyaxonStack
) -> None:
    name = run_name_in(live_bot.command("run recipe=quickstart-tf epochs=3 lr=0.1"))
    run = live_bot.wait_status(name, {"succeeded"}, timeout=240)
    card = reply_text(live_bot.wait_card(run, "succeeded", "accuracy", "epoch 3/3"))
    assert "quickstart-tf" in card
    assert live_bot.run_named(name).last_step == 3  # epochs count from one, as Keras prints them
    accuracy = float(run.last_metrics["accuracy"])
    assert accuracy > 0.8
    saved = Path(polyaxon_stack.store) / str(run.polyaxon_uuid) / "outputs" / "model" / "model.keras"
    assert saved.is_file()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    model = keras.saving.load_model(saved)
    x, y = held_out()
    predicted = np.asarray(model.predict(x, verbose=0)).argmax(axis=1)
    assert float((predicted == y).mean()) == pytest.approx(accuracy, abs=1e-6)
    # Read back and checked like every run's outputs: the Keras file in the model manifest, the eval results.
    confirmed = reply_text(live_bot.command(f"outputs {name}"))
    assert "confirmed :white_check_mark:" in confirmed, confirmed
    assert live_bot.run_named(name).outputs_confirmed_at is not None


@pytest.mark.slow  # a second TF run (~11 s); compare is tested on every recipe kind in test_lifecycle.py
def test_two_tf_runs_compare_on_one_eval_contract(live_bot: LiveBot) -> None:
    first = confirmed_tf_run(live_bot)
    name = run_name_in(live_bot.command("run recipe=quickstart-tf epochs=2 lr=0.2"))
    live_bot.wait_status(name, {"succeeded"}, timeout=240)
    compared = reply_text(live_bot.command(f"compare {first.name} {name}"))
    assert "Posted the comparison" in compared, compared
    table = wait_for(
        lambda: [
            m for m in live_bot.standin.replies(CHANNEL, first.card_ts or "") if "Comparison" in str(m.get("text"))
        ],
        timeout=60,
    )
    blocks = str(table[-1].get("blocks"))
    assert "accuracy" in blocks and name in blocks and "lr" in blocks, blocks


@pytest.mark.slow  # ~1 min: two trials and a registration; the run, outputs and compare above run by default
def test_a_sweep_over_lr_and_register_the_best(live_bot: LiveBot) -> None:
    confirmed_tf_run(live_bot)  # a sweep waits for one confirmed run of its pins
    swept = reply_text(live_bot.command("sweep recipe=quickstart-tf lr=0.05,0.1 epochs=2"))
    name = run_name_in({"text": swept})
    live_bot.wait_status(name, {"succeeded", "done"}, timeout=300)
    with live_bot.runtime.services.sessions() as s:
        sweep = repos.get_run_by_name(s, name=name)
        assert sweep is not None
        trials = repos.sweep_trials(s, sweep_run_id=sweep.id or 0)
    assert len(trials) == 2 and all("accuracy" in t.last_metrics for t in trials)
    best = max(trials, key=lambda t: float(t.last_metrics["accuracy"]))
    asked = reply_text(live_bot.command(f"register {best.name} model=qs-tf", user=ALICE))
    assert "approval request" in asked, asked
    with live_bot.runtime.services.sessions() as s:
        [request] = repos.list_approval_requests(s, model="qs-tf")
    assert request.message_ts is not None
    live_bot.standin.react_as_user(BOB, CHANNEL, request.message_ts, "white_check_mark")
    live_bot.sender.reaction(
        "reaction_added", user=BOB, channel=CHANNEL, ts=request.message_ts, reaction="white_check_mark"
    )

    def registered() -> bool:
        with live_bot.runtime.services.sessions() as s:
            return repos.get_registration(s, model="qs-tf", version="v1") is not None

    wait_for(registered, timeout=120)


def confirmed_tf_run(bot: LiveBot) -> Run:
    """A succeeded quickstart-tf run whose outputs are confirmed: the first test's, or a new one (run alone)."""
    with bot.runtime.services.sessions() as s:
        runs = [r for r in repos.list_recent_runs(s, limit=100) if r.recipe_name == "quickstart-tf"]
    found = next((r for r in runs if r.status == "succeeded" and r.outputs_confirmed_at is not None), None)
    if found is not None:
        return found
    name = run_name_in(bot.command("run recipe=quickstart-tf epochs=2"))
    bot.wait_status(name, {"succeeded"}, timeout=240)
    assert "confirmed :white_check_mark:" in reply_text(bot.command(f"outputs {name}"))
    return bot.run_named(name)
