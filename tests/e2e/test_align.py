"""TRL's preference and reinforcement trainers through the real front door and the local Polyaxon stack (issue 36):
DPO and GRPO end to end (card with the contract's metrics, outputs confirmed, compare, register), data in another
format refused before anything is submitted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Run
from tests.e2e.conftest import CHANNEL, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

BOB = "U0BOB0001"


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    """A bot whose approver is bob."""
    with start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("e2e-align"), approvers=[BOB]) as bot:
        yield bot


def comparison(bot: LiveBot, run: Run) -> str:
    """The newest comparison posted in the run's thread, as its blocks' text."""
    found = wait_for(
        lambda: [m for m in bot.standin.replies(CHANNEL, run.card_ts or "") if "Comparison" in str(m.get("text"))]
    )
    return str(found[-1].get("blocks"))


def polyaxon_runs(bot: LiveBot) -> int:
    """How many runs the bot's Polyaxon project holds."""
    return len(bot.runtime.services.gateway.list_runs(limit=100))


def test_dpo_alone_and_chained_on_an_sft_run_then_outputs_compare_and_register(live_bot: LiveBot) -> None:
    sft_name = run_name_in(live_bot.command("run recipe=sft-tiny max_steps=20 save_steps=20"))
    plain_name = run_name_in(live_bot.command("run recipe=dpo-tiny beta=0.1"))
    plain = live_bot.wait_status(plain_name, {"succeeded"}, timeout=300)
    live_bot.wait_card(plain, "succeeded", "eval_preference_accuracy")
    # The trainer's own evaluation (procedure pref-v1), under the contract the catalog pinned.
    metrics = dict(live_bot.run_named(plain_name).last_metrics or {})
    assert 0.5 <= float(metrics["eval_preference_accuracy"]) <= 1.0, metrics  # the tiny pattern is learnt
    outputs = reply_text(live_bot.command(f"outputs {plain_name}"))
    assert "confirmed" in outputs and "not confirmed" not in outputs, outputs
    [upload] = [f for f in live_bot.standin.files() if f.get("name", "").endswith("eval_results.json")]
    document = json.loads(upload["content"])
    assert document["contract_hash"] == plain.eval_contract_hash
    assert document["contract"]["procedure_version"] == "pref-v1"
    assert set(document["metrics"]) == {"eval_preference_accuracy", "eval_reward_margin"}, document["metrics"]

    # DPO on the SFT run's final model: only once `outputs` confirmed it, then pinned by the digest it recorded.
    live_bot.wait_status(sft_name, {"succeeded"}, timeout=300)
    refused = reply_text(live_bot.command(f"run recipe=dpo-tiny base={sft_name}"))
    assert "outputs are not confirmed" in refused and f"/finetune outputs {sft_name}" in refused, refused
    assert "not confirmed" not in reply_text(live_bot.command(f"outputs {sft_name}"))
    sft = live_bot.run_named(sft_name)
    digest = (sft.outputs_check or {})["model_digest"]
    chained_name = run_name_in(live_bot.command(f"run recipe=dpo-tiny base={sft_name} beta=0.2"))
    chained = live_bot.wait_status(chained_name, {"succeeded"}, timeout=300)
    assert chained.pins["base"] == f"{sft_name}@{digest}" and chained.pins["model"] == sft.pins["model"]
    assert chained.params["base_run"] == sft.polyaxon_uuid and chained.params["base_model_digest"] == digest
    assert chained.params["model_name_or_path"] == "outputs/model"
    live_bot.wait_card(chained, "succeeded", f"base `{sft_name}@")
    # The job loaded the SFT run's model, checked against the digest its outputs recorded.
    assert "Posted the last" in reply_text(live_bot.command(f"logs {chained_name} lines=200"))
    posted = [bytes(f["content"]).decode(errors="replace") for f in live_bot.standin.files() if f.get("content")]
    shown = "\n".join([*live_bot.thread(live_bot.run_named(chained_name)), *posted])
    assert f"starting from base run {sft.polyaxon_uuid}'s model" in shown and f"({digest})" in shown, shown[-3000:]

    # Same eval contract: compared on the preference metrics, what differs shown.
    assert "Posted the comparison" in reply_text(live_bot.command(f"compare {plain_name} {chained_name}"))
    table = comparison(live_bot, live_bot.run_named(plain_name))
    assert "eval_preference_accuracy" in table and "beta" in table, table

    reply = reply_text(live_bot.command(f"register {plain_name} model=tiny-dpo"))
    assert "approval request" in reply, reply
    with live_bot.runtime.services.sessions() as s:
        [request] = list(repos.list_approval_requests(s, model="tiny-dpo"))
    shown = str(live_bot.standin.message(CHANNEL, request.message_ts or "").get("blocks"))
    assert "eval_preference_accuracy" in shown and "tiny-dpo.yaml" in shown, shown  # the model's own criteria
    live_bot.approve(request.message_ts or "", BOB)
    live_bot.wait_registered("tiny-dpo", ["v1"])


def test_grpo_runs_with_its_reward_functions_to_a_mean_reward_on_the_card(live_bot: LiveBot) -> None:
    name = run_name_in(live_bot.command("run recipe=grpo-tiny rewards=format,length"))
    run = live_bot.wait_status(name, {"succeeded"}, timeout=300)
    live_bot.wait_card(run, "succeeded", "eval_mean_reward")
    assert run.params is not None and run.params["reward_funcs"] == "format,length"
    outputs = reply_text(live_bot.command(f"outputs {name}"))
    assert "confirmed" in outputs and "not confirmed" not in outputs, outputs
    metrics = dict(live_bot.run_named(name).last_metrics or {})
    assert {"eval_mean_reward", "eval_reward_format", "eval_reward_length"} <= set(metrics), metrics
    assert 0.0 <= float(metrics["eval_mean_reward"]) <= 2.0  # two functions, each in [0, 1]


def test_data_in_another_format_or_an_unknown_reward_is_refused_before_anything_is_submitted(
    live_bot: LiveBot,
) -> None:
    before = polyaxon_runs(live_bot)
    refused = reply_text(live_bot.command("run recipe=dpo-tiny dataset=tiny-chat"))
    assert "DPO needs preference (prompt, chosen, rejected)" in refused, refused
    assert "tiny-chat is conversational language_modeling (messages) with columns messages" in refused, refused
    unknown = reply_text(live_bot.command("run recipe=grpo-tiny rewards=format,lenght"))
    assert "no reward function 'lenght'; did you mean length?" in unknown, unknown
    free = reply_text(live_bot.command("run recipe=dpo-tiny dataset=/tmp/mine.jsonl"))
    assert "never by path or URL" in free, free
    assert polyaxon_runs(live_bot) == before
