"""An eval contract on lm-evaluation-harness through the real front door and the local Polyaxon stack (issue 37):
`sft-tiny-lmeval` with the harness's metrics on its card, confirmed by `outputs`; `/finetune eval RUN` as a run of
kind eval in the run's thread, with the same results; compare refusing runs whose task hashes differ.

The test catalog adds `sft-tiny-lmeval-alt`: the same suite on a copy of the tiny Llama whose chat template adds a
line, so its prompts, and with them lm-eval's task hashes, differ while the contract (and its hash) is the same.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Run
from tests.e2e.conftest import CHANNEL, REPO, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

ALT_MODEL = ".finetune/models/tiny-llama-alt-template"
BOB = "U0BOB0001"
METRICS = ("tiny_capitals-acc", "tiny_capitals-acc_norm", "tiny_arith-exact_match")


def _alt_model(tiny_model: Path) -> None:
    """The tiny Llama with one more line in its chat template (the local agent runs jobs in the repository)."""
    alt = REPO / ALT_MODEL
    shutil.rmtree(alt, ignore_errors=True)
    shutil.copytree(tiny_model, alt)
    config_path = alt / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    template = alt / "chat_template.jinja"
    if "chat_template" in config:
        config["chat_template"] = "Answer briefly.\n" + config["chat_template"]
        config_path.write_text(json.dumps(config))
    else:
        template.write_text("Answer briefly.\n" + template.read_text())


def _catalog(root: Path) -> Path:
    """The shipped catalog (with its data) plus `sft-tiny-lmeval-alt`; the repository's model and code beside it."""
    catalog = root / "manifests"
    shutil.copytree(REPO / "manifests", catalog)
    for name in (".finetune", "trainer"):
        (root / name).symlink_to(REPO / name)
    recipe = (catalog / "recipes" / "sft-tiny-lmeval.yaml").read_text()
    alt = recipe.replace("name: sft-tiny-lmeval\n", "name: sft-tiny-lmeval-alt\n").replace(
        "  path: .finetune/models/tiny-llama\n  build: python -m trainer.tiny_model .finetune/models/tiny-llama\n",
        f"  path: {ALT_MODEL}\n",
    )
    assert alt.count(ALT_MODEL) == 1
    (catalog / "recipes" / "sft-tiny-lmeval-alt.yaml").write_text(alt)
    return catalog


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    _alt_model(tiny_model)
    folder = tmp_path_factory.mktemp("e2e-lmeval")
    try:
        with start_live_bot(polyaxon_stack, folder, catalog_dir=_catalog(folder), approvers=[BOB]) as bot:
            yield bot
    finally:
        shutil.rmtree(REPO / ALT_MODEL, ignore_errors=True)


def test_a_harness_contract_on_the_card_confirmed_by_outputs_then_eval_and_compare(live_bot: LiveBot) -> None:
    name = run_name_in(live_bot.command("run recipe=sft-tiny-lmeval"))
    alt_name = run_name_in(live_bot.command("run recipe=sft-tiny-lmeval-alt max_steps=4 save_steps=4"))
    sft_name = run_name_in(live_bot.command("run recipe=sft-tiny max_steps=4 save_steps=4"))  # judged on eval_loss
    run = live_bot.wait_status(name, {"succeeded"}, timeout=300)
    live_bot.wait_card(run, "succeeded", *METRICS)
    metrics = dict(live_bot.run_named(name).last_metrics or {})
    assert all(0.0 <= float(metrics[m]) <= 1.0 for m in METRICS), metrics

    # outputs: the results carry the contract's hash, the harness version and a hash per task, and check out.
    outputs = reply_text(live_bot.command(f"outputs {name}"))
    assert "confirmed" in outputs and "not confirmed" not in outputs, outputs
    [upload] = [f for f in live_bot.standin.files() if f.get("name", "") == f"{name}-eval_results.json"]
    document = json.loads(upload["content"])
    assert document["contract_hash"] == run.eval_contract_hash
    assert document["contract"]["tasks"] == run.eval_contract["tasks"]
    harness = document["harness"]
    assert harness["version"] == "0.4.13" and set(harness["tasks"]) == {"tiny_capitals", "tiny_arith"}
    assert all(task["hash"] for task in harness["tasks"].values()), harness
    assert set(document["stderr"]) == set(METRICS), document
    confirmed = live_bot.run_named(name)
    assert (confirmed.outputs_check or {})["eval_task_hashes"] == {t: v["hash"] for t, v in harness["tasks"].items()}

    # eval RUN: a run of kind eval in the run's thread, on the same suite and contract, with the same numbers.
    reply = live_bot.command(f"eval {name}")
    started = reply_text(reply)
    assert "on suite *tiny*" in started and f"thread of `{name}`" in started, started
    evaluation = live_bot.run_named(run_name_in(reply))
    again = reply_text(live_bot.command(f"eval {name}"))  # the same model on the same suite, while it runs
    assert "already" in again and evaluation.name in again, again
    assert evaluation.kind == "eval" and evaluation.parent_run_id == confirmed.id
    assert evaluation.thread_ts == confirmed.card_ts, "its card is in the evaluated run's thread"
    assert evaluation.eval_contract_hash == confirmed.eval_contract_hash
    evaluation = live_bot.wait_status(evaluation.name, {"succeeded"}, timeout=300)
    evaluated = dict(live_bot.run_named(evaluation.name).last_metrics or {})
    assert {m: evaluated[m] for m in METRICS} == {m: metrics[m] for m in METRICS}, (evaluated, metrics)
    assert "not confirmed" not in reply_text(live_bot.command(f"outputs {evaluation.name}"))

    # compare: the same contract, but the alt model's chat template makes other prompts, so other task hashes.
    live_bot.wait_status(alt_name, {"succeeded"}, timeout=300)
    alt = live_bot.run_named(alt_name)
    assert alt.eval_contract_hash == confirmed.eval_contract_hash
    refused = reply_text(live_bot.command(f"compare {name} {alt_name}"))
    assert "not comparable" in refused and "task tiny_capitals hash" in refused, refused
    assert f"({name})" in refused and f"({alt_name})" in refused, refused
    assert "Posted the comparison" in reply_text(live_bot.command(f"compare {name} {alt_name} --exploratory"))
    table = wait_for(
        lambda: [m for m in live_bot.standin.replies(CHANNEL, confirmed.card_ts or "") if "Comparison" in str(m)]
    )
    assert "± " in str(table[-1].get("blocks")) and "standard error" in str(table[-1].get("blocks"))

    # An sft-tiny run is judged on its own contract (eval_loss): compared with the harness run only through an
    # evaluation of it on the suite, as the refusal says; its evaluation's card says what it is, not a resume.
    live_bot.wait_status(sft_name, {"succeeded"}, timeout=300)
    assert "not confirmed" not in reply_text(live_bot.command(f"outputs {sft_name}"))
    refused = reply_text(live_bot.command(f"compare {name} {sft_name}"))
    assert "evaluated differently" in refused and f"/finetune eval {sft_name} suite=tiny" in refused, refused
    of_sft = live_bot.wait_status(
        run_name_in(live_bot.command(f"eval {sft_name} suite=tiny")), {"succeeded"}, timeout=300
    )
    card = reply_text(live_bot.card(of_sft))
    assert ":bar_chart: evaluates" in card and sft_name in card.split(":bar_chart: evaluates", 1)[1], card
    assert "resumed from" not in card and "non-comparable" not in card, card
    sft = live_bot.run_named(sft_name)
    # Named as the run (compared in the first run's thread) or as its evaluation (in the evaluated run's).
    for pair, thread in ((f"{name} {sft_name}", confirmed), (f"{of_sft.name} {name}", sft)):
        before = len(comparisons(live_bot, thread))
        assert "Posted the comparison" in reply_text(live_bot.command(f"compare {pair}")), pair
        shown = str(wait_for(lambda t=thread, n=before: comparisons(live_bot, t)[n:])[-1].get("blocks"))
        assert f"`{sft_name}`: its numbers are its evaluation `{of_sft.name}`'s" in shown, shown
        assert "EXPLORATORY" not in shown and "tiny_capitals-acc" in shown, shown
    assert sft.eval_contract_hash != confirmed.eval_contract_hash

    # A registered version is evaluated too (its run's final model), and its criteria cite the harness's metrics.
    assert "approval request" in reply_text(live_bot.command(f"register {name} model=tiny-lmeval"))
    with live_bot.runtime.services.sessions() as s:
        [request] = list(repos.list_approval_requests(s, model="tiny-lmeval"))
    shown = str(live_bot.standin.message(CHANNEL, request.message_ts or "").get("blocks"))
    assert "tiny_capitals-acc" in shown and "tiny-lmeval.yaml" in shown, shown
    live_bot.approve(request.message_ts or "", BOB)
    live_bot.wait_registered("tiny-lmeval", ["v1"])
    reply = live_bot.command("eval tiny-lmeval:v1")
    assert f"model tiny-lmeval:v1 (run {name})" in reply_text(reply), reply
    of_version = live_bot.wait_status(run_name_in(reply), {"succeeded"}, timeout=300)
    assert (
        of_version.parent_run_id == confirmed.id
        and of_version.params["subject"] == f"model tiny-lmeval:v1 (run {name})"
    )


def comparisons(bot: LiveBot, run: Run) -> list[dict[str, Any]]:
    """The comparisons posted in a run's thread, oldest first."""
    return [m for m in bot.standin.replies(CHANNEL, run.card_ts or "") if "Comparison" in str(m)]


def test_eval_refuses_what_it_cannot_evaluate(live_bot: LiveBot) -> None:
    unknown = reply_text(live_bot.command("eval nosuchrun"))
    assert "nosuchrun" in unknown, unknown
    missing = reply_text(live_bot.command("eval tiny-chat:v9"))
    assert "`tiny-chat:v9` is not registered" in missing, missing
