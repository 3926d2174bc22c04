"""The run form's fields and checks, without Slack: what a recipe's form holds, and what an entry stands for."""

from __future__ import annotations

from typing import Any

import pytest

from bot.catalog import Catalog
from bot.forms.fields import (
    CHANNEL_BLOCK,
    RECIPE_BLOCK,
    Entered,
    FormContext,
    Prefill,
    allowed_presets,
    check_entered,
    error_block,
    field_specs,
    key_block,
    presets_block,
    read_entered,
)
from bot.forms.render import render_form, render_preview
from bot.forms.seal import FormSeal
from bot.grammar import CommandError, RunCommand, parse_command
from bot.local.slack.views import check_view
from tests.fixtures.slack import load_catalog


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """The shipped catalog."""
    return load_catalog()  # type: ignore[no-any-return]


def entered(recipe: str | None, values: dict[str, str] | None = None, presets: list[str] | None = None) -> Entered:
    """A form filled in for #ml-training."""
    return Entered(context=FormContext(channel="C0TRAIN01"), recipe=recipe, presets=presets, values=values or {})


def test_every_settable_key_is_a_field_with_its_default(catalog: Catalog) -> None:
    specs = {s.key: s for s in field_specs(catalog, catalog.recipe("sft-tiny"))}
    assert specs["lr"].default == 0.003 and specs["lr"].label == "lr (learning_rate)"
    assert "float in (0, 0.01]" in specs["lr"].hint and "recipe default 0.003" in specs["lr"].hint
    assert specs["scheduler"].default == "linear" and specs["scheduler"].spec.type == "choice"
    assert "resume_from" not in specs  # only `/finetune resume` sets it


def test_presets_offered_fit_the_component(catalog: Catalog) -> None:
    job = {p.name for p in allowed_presets(catalog, catalog.recipe("sft-tiny"))}
    distributed = {p.name for p in allowed_presets(catalog, catalog.recipe("sft-tiny-ddp"))}
    assert "gpu-1x" in job and "ddp-2x8" not in job
    assert "ddp-2x8" in distributed and "gpu-1x" not in distributed


@pytest.mark.parametrize(
    ("values", "presets", "text"),
    [
        ({}, None, "run recipe=sft-tiny"),
        ({"lr": "0.003", "max_steps": "40"}, ["cpu-small"], "run recipe=sft-tiny"),  # the defaults: nothing
        ({"lr": "3e-3"}, None, "run recipe=sft-tiny"),  # the same number written otherwise
        ({"lr": "2e-3", "scheduler": "cosine"}, None, "run recipe=sft-tiny lr=2e-3 scheduler=cosine"),
        ({}, ["cpu-small", "spot"], "run recipe=sft-tiny preset=cpu-small,spot"),
    ],
    ids=["empty", "defaults", "default-written-otherwise", "changed", "presets"],
)
def test_only_what_differs_from_the_recipe_goes_into_the_command(
    catalog: Catalog, values: dict[str, str], presets: list[str] | None, text: str
) -> None:
    checked = check_entered(catalog, entered("sft-tiny", values, presets), needs_channel=False)
    assert checked.errors == {} and checked.text == text
    assert isinstance(parse_command(text), RunCommand)  # the same parser reads it


@pytest.mark.parametrize(
    ("values", "key", "message"),
    [
        ({"lr": "0.5"}, "lr", "0.5 is out of bounds: float in (0, 0.01]"),
        ({"lr": "fast"}, "lr", "expected float in (0, 0.01]"),
        ({"max_steps": "2e2"}, "max_steps", "write 200, not 2e2"),  # within bounds: how to write an int
        ({"scheduler": "cosin"}, "scheduler", "did you mean cosine"),
    ],
    ids=["out-of-bounds", "not-a-number", "int-as-float", "closest-choice"],
)
def test_a_bad_field_is_named_with_what_would_be_right(
    catalog: Catalog, values: dict[str, str], key: str, message: str
) -> None:
    checked = check_entered(catalog, entered("sft-tiny", values), needs_channel=False)
    assert checked.text is None and list(checked.errors) == [key_block("sft-tiny", key)]
    assert message in checked.errors[key_block("sft-tiny", key)]


def test_recipe_and_channel_are_required(catalog: Catalog) -> None:
    blank = Entered(context=FormContext(channel=None, origin="home"))
    assert check_entered(catalog, blank, needs_channel=True).errors == {
        CHANNEL_BLOCK: "Choose the channel the run's card goes to.",
        RECIPE_BLOCK: "Choose a recipe.",
    }


def test_catalog_refusals_land_on_the_field_they_are_about() -> None:
    form = entered("sft-tiny", {"lr": "0.001"})
    assert error_block("presets gpu-1x and cpu-large both set resources", form) == presets_block("sft-tiny")
    assert error_block("lr: something about lr=0.001", form) == key_block("sft-tiny", "lr")
    assert error_block("the model folder is missing", form) == RECIPE_BLOCK


def test_the_form_reads_back_what_it_rendered(catalog: Catalog) -> None:
    ctx = FormContext(channel="C0TRAIN01", origin="rerun", rerun_of="sft-tiny-0123456789", opener="U0ALICE01")
    seal = FormSeal.random()
    prefill = Prefill(recipe="sft-tiny", presets=("cpu-small",), overrides={"lr": 0.002})
    view = render_form(catalog, ctx, prefill, seal)
    check_view(view, kind="modal")  # within Slack's limits, as the stand-in checks them
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        state: dict[str, Any] = {"type": element["type"]}
        if "initial_option" in element:
            state["selected_option"] = element["initial_option"]
        elif "initial_options" in element:
            state["selected_options"] = element["initial_options"]
        else:
            state["value"] = element.get("initial_value")
        values[block["block_id"]] = {element["action_id"]: state}
    back = read_entered({**view, "state": {"values": values}}, seal.open(view["private_metadata"]))
    assert back.context == ctx and back.recipe == "sft-tiny" and back.presets == ["cpu-small"]
    assert back.values["lr"] == "0.002" and back.values["max_steps"] == "40"
    assert check_entered(catalog, back, needs_channel=False).text == "run recipe=sft-tiny lr=0.002"


def test_every_recipe_renders_a_valid_form_and_the_preview_of_errors_too(catalog: Catalog) -> None:
    for name in catalog.recipes:
        ctx = FormContext(channel=None, origin="home", opener="U0ALICE01")
        check_view(render_form(catalog, ctx, Prefill(recipe=name), FormSeal.random()), kind="modal")
    preview = render_preview(None, {RECIPE_BLOCK: "Choose a recipe."}, {RECIPE_BLOCK: "Recipe"})
    check_view(preview, kind="modal")
    assert "*Recipe*: Choose a recipe." in str(preview["blocks"])


def test_a_preset_option_stays_one_word_of_the_command(catalog: Catalog) -> None:
    # An option value is whatever the payload says: one that smuggles a flag must not become one.
    checked = check_entered(catalog, entered("sft-tiny", presets=["cpu-small --force"]), needs_channel=False)
    assert checked.text == "run recipe=sft-tiny preset='cpu-small --force'"
    with pytest.raises(CommandError, match="is not a name"):
        parse_command(checked.text)


def test_values_of_another_type_than_slack_sends_are_problems_on_their_fields(catalog: Catalog) -> None:
    ctx = FormContext(channel="C0TRAIN01", opener="U0ALICE01")
    values = {
        RECIPE_BLOCK: {"finetune_form:recipe": {"selected_option": {"value": "sft-tiny"}}},
        CHANNEL_BLOCK: {"value": {"selected_conversation": "C0SECRET1"}},  # no channel field in this form
        key_block("sft-tiny", "lr"): {"value": {"value": {"lr": 1}}},
        key_block("sft-tiny", "scheduler"): {"value": {"selected_option": {"value": "cosine"}}},
        presets_block("sft-tiny"): {"value": {"selected_options": [{"value": 3}]}},
    }
    back = read_entered({"state": {"values": values}}, ctx)
    assert back.channel == "C0TRAIN01"  # the sealed channel: the state cannot move the run elsewhere
    assert back.values == {"scheduler": "cosine"}
    assert set(back.problems) == {key_block("sft-tiny", "lr"), presets_block("sft-tiny")}
    checked = check_entered(catalog, back, needs_channel=False)
    assert checked.text is None and set(checked.errors) == set(back.problems)
    assert read_entered({"state": "garbage"}, ctx).recipe is None  # no state at all: nothing chosen
