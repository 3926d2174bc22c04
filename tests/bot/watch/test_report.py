"""What the watcher tells from a run's outputs: the final evaluation, checkpoints, and where a resume started."""

from __future__ import annotations

from bot.failures.render import resume_hint
from bot.watch.report import checkpoint_step, final_eval, metrics_text, resumed_text
from storage.models import Run


def run(**fields: object) -> Run:
    base: dict[str, object] = dict(
        name="sft-tiny-1",
        recipe_name="sft-tiny",
        recipe_hash="h",
        component="trl-sft",
        params={"max_steps": 500},
        overrides={"lr": 0.003},
        presets=[],
        pins={},
        comparable=True,
        eval_contract={},
        eval_contract_hash="",
        requester="U1",
        channel="C1",
        status="failed",
    )
    return Run(**{**base, **fields})  # type: ignore[arg-type]


def test_final_eval_needs_the_final_evaluations_hash() -> None:
    assert final_eval({"eval_loss": 3.0}) == {}
    assert final_eval({"eval_loss": 3, "eval_perplexity": 20.1, "loss": 2.9, "eval_contract_hash": "sha256:x"}) == {
        "eval_loss": 3.0,
        "eval_perplexity": 20.1,
    }


def test_resume_is_offered_only_with_a_checkpoint() -> None:
    assert checkpoint_step({"checkpoint_latest_step": 72}) == 72 and checkpoint_step({}) is None
    assert "/finetune resume sft-tiny-1" in resume_hint(run(checkpoint_step=72))
    hint = resume_hint(run())
    assert "can't be resumed" in hint and "`/finetune run recipe=sft-tiny lr=0.003`" in hint


def test_the_resumed_step_is_told_with_the_schedule() -> None:
    assert resumed_text({}, run()) is None
    told = resumed_text({"resumed_from_checkpoint": "checkpoint-72", "resumed_from_step": 72, "max_steps": 600}, run())
    assert told == ":leftwards_arrow_with_hook: Resumed from `checkpoint-72` (step 72/600)."
    assert resumed_text({"resumed_from_step": 72}, run()) == (
        ":leftwards_arrow_with_hook: Resumed from `checkpoint-72` (step 72/500)."
    )


def test_the_final_evaluation_includes_the_contracts_own_metrics_and_shows_them_as_eval() -> None:
    outputs = {"accuracy": 0.9883, "loss": 0.0446, "eval_contract_hash": "sha256:x", "model_digest": "sha256:y"}
    assert final_eval(outputs) == {}
    metrics = final_eval(outputs, ["accuracy", "loss"])
    assert metrics == {"accuracy": 0.9883, "loss": 0.0446}
    text = metrics_text(metrics, ["accuracy", "loss"])
    assert "*Eval* accuracy `0.9883` · loss `0.0446`" in text and "*Train*" not in text
