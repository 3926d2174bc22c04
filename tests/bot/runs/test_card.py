"""The card shows what sets a run apart: its overrides, the presets it chose, and pins by their identifying part."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.runs.card import CardView, card_view, durations_line, render_card, short_pin
from storage.models import Run

HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("pin", "shown"),
    [
        (f"ghcr.io/finetune-bot/trainer@sha256:{HEX}", "trainer@sha256:0123456789ab…"),
        (f".finetune/models/tiny-llama@sha256:{HEX}", "tiny-llama@sha256:0123456789ab…"),
        (f"Qwen/Qwen2.5-0.5B@{HEX[:40]}", "Qwen2.5-0.5B@0123456789ab…"),
        (HEX[:40], "0123456789ab…"),
        (f"HuggingFaceH4/ultrachat@{HEX[:40]}+sha256:{HEX}", "ultrachat@0123456789ab…+sha256:0123456789ab…"),
        (".finetune/models/x@unbuilt", "x@unbuilt"),
    ],
    ids=["image", "local-model", "hub-model", "commit", "hub-dataset", "unbuilt"],
)
def test_pins_are_shown_by_their_identifying_part(pin: str, shown: str) -> None:
    assert short_pin(pin) == shown


def card_text(view: CardView) -> str:
    return "\n".join(
        str(block.get("text", {}).get("text", "")) + " ".join(str(e.get("text")) for e in block.get("elements", []))
        for block in render_card(view)
    )


def test_the_card_shows_overrides_chosen_presets_and_offers_resume_only_with_a_checkpoint() -> None:
    view = CardView(
        name="sft-tiny-1",
        recipe="sft-tiny",
        requester="U1",
        status="failed",
        presets=["gpu-1x", "spot"],
        recipe_presets=["gpu-1x"],
        overrides={"lr": 0.003, "use_peft": True},
    )
    text = card_text(view)
    assert "`lr=0.003`" in text and "`use_peft=true`" in text
    assert "`gpu-1x`," in text and "`spot` (chosen)" in text
    assert "Resume" not in str(render_card(view)[-1])
    assert "Resume" in str(render_card(view.model_copy(update={"checkpoint_step": 20}))[-1])
    plain = card_text(view.model_copy(update={"overrides": {}}))
    assert "none (the recipe's defaults)" in plain


def test_the_card_shows_the_attempt_why_the_last_one_ended_and_this_ones_class_and_hint() -> None:
    failure = {
        "kind": "oom_cuda",
        "title": "Out of GPU memory",
        "evidence": "torch.OutOfMemoryError: CUDA out of memory.",
        "hint": "try `batch_size=4`",
        "retry": "no",
    }
    view = CardView(
        name="sft-lora-2",
        recipe="sft-lora",
        requester="U1",
        status="failed",
        attempt=2,
        attempts=3,
        previous_failure="Preempted",
        failure=failure,
        durations="waited 12 s · ran 3 min 4 s",
    )
    text = card_text(view)
    assert "attempt 2/3" in text and "attempt 1 ended: Preempted" in text
    assert "*Out of GPU memory*: `torch.OutOfMemoryError: CUDA out of memory.`" in text
    assert "try `batch_size=4`" in text and "waited 12 s · ran 3 min 4 s" in text
    # While it waits, the card says on what; a first attempt of a recipe without retries shows no attempt count.
    waiting = CardView(name="x", recipe="sft-tiny", requester="U1", status="queued", condition="Unschedulable: 0/3")
    assert "*Waiting*: Unschedulable: 0/3" in card_text(waiting) and "attempt" not in card_text(waiting)


def test_the_card_says_the_running_time_its_hours_count_and_what_it_held() -> None:
    created = datetime(2026, 5, 1, tzinfo=UTC)
    run = Run(
        name="quickstart-1",
        polyaxon_uuid="u" * 32,
        recipe_name="quickstart",
        recipe_hash="h",
        requester="U1",
        channel="C1",
        status="succeeded",
        created_at=created,
        started_at=created + timedelta(seconds=4),
        finished_at=created + timedelta(seconds=42),
    )
    # Settled by the usage service: 38 s measured, 1 core held, so 38 / 3600 core-hours.
    run.cost = {"unit": "core", "count": 1.0, "used_s": 38.0, "used_hours": 38.0 / 3600}
    line = durations_line(run, created + timedelta(minutes=5)) or ""
    assert line == "waited 4 s · ran 38 s · used 0.0106 core-hours (1 core)", line
    # Two accelerators with a price: the hours are the time shown × 2.
    run.cost = {"unit": "accelerator", "count": 2.0, "used_s": 38.0, "used_hours": 76.0 / 3600, "used_money": 0.06}
    run.cost["currency"] = "USD"
    assert "ran 38 s · used 0.0211 accelerator-hours (2 accelerators, 0.06 USD)" in (durations_line(run, created) or "")


@pytest.mark.parametrize(
    ("params", "step", "shown"),
    [
        ({"epochs": 3}, 3, "epoch 3/3"),
        ({"max_steps": 60, "epochs": 1}, 30, "step 30/60"),
        ({}, 7, "step 7"),
        ({"epochs": True}, 2, "step 2"),
    ],
    ids=["quickstart-epochs", "trainer-steps", "no-total", "not-a-count"],
)
def test_the_card_counts_progress_in_what_the_recipe_trains_by(params: dict[str, Any], step: int, shown: str) -> None:
    run = Run(name="q-1", recipe_name="quickstart", recipe_hash="h", requester="U1", channel="C1", status="succeeded")
    run.params, run.last_step = params, step
    assert shown in card_text(card_view(run, polyaxon_url=None))
