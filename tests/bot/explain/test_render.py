"""Block Kit rendering: the dry-run plan and the list/help/error replies, within Slack's limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.catalog import Catalog
from bot.catalog.manifests import PINNED_INPUTS
from bot.explain import (
    USAGE,
    render_command_error,
    render_help,
    render_plan,
    render_presets,
    render_recipes,
)
from bot.grammar import SUBCOMMANDS, CommandError, RunCommand, parse_command
from bot.slack.blocks import MAX_BLOCKS, MAX_SECTION
from tests.manifests.catalog_repo import make_repo


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The shipped catalog (with a tiny model folder)."""
    return Catalog.load(make_repo(tmp_path_factory.mktemp("repo")))


def texts(blocks: list[dict[str, Any]]) -> str:
    """All the text of a message, joined."""
    out = []
    for block in blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        out.extend(element["text"] for element in block.get("elements", []))
    return "\n".join(out)


def assert_within_limits(blocks: list[dict[str, Any]]) -> None:
    """Slack's limits: 50 blocks, 3000 characters a section, 150 a header, 10 context elements."""
    assert 0 < len(blocks) <= MAX_BLOCKS
    for block in blocks:
        if block["type"] == "section":
            assert block["text"]["type"] == "mrkdwn" and 0 < len(block["text"]["text"]) <= MAX_SECTION
        elif block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
        elif block["type"] == "context":
            assert 0 < len(block["elements"]) <= 10
    json.dumps(blocks)


def test_render_plan_for_sft_tiny(catalog: Catalog) -> None:
    command = parse_command("run recipe=sft-tiny lr=5e-3 preset=cpu-small --dry-run")
    assert isinstance(command, RunCommand)
    plan = catalog.plan(command)
    blocks = render_plan(plan)
    assert_within_limits(blocks)
    text = texts(blocks)
    assert blocks[0]["text"]["text"] == "Dry run: sft-tiny"
    for name in ("image", "code", "model", "dataset", "eval_contract"):
        assert f"• {name}: `" in text
    assert "`learning_rate` = 0.005  ← _command line_" in text
    assert "`max_steps` = 40  ← _recipe recipes/sft-tiny.yaml_" in text
    assert "lora_r=16" in text  # component defaults are listed too
    assert "limits: cpu=2, memory=4Gi" in text and "← _preset cpu-small_" in text
    assert f"hash `{plan.eval_contract_hash}`" in text
    assert "*Warnings*\nnone" in text
    assert "Nothing was submitted" in text


def test_component_defaults_leave_out_what_the_recipe_pins(catalog: Catalog) -> None:
    # sft-tiny pins a local model folder by its content digest: the component's `model_revision='main'` is no pin.
    plan = catalog.plan(RunCommand(recipe="sft-tiny", dry_run=True))
    assert plan.provenance.get("model_revision") == "component default"
    sections = [block["text"]["text"] for block in render_plan(plan) if block["type"] == "section"]
    [defaults] = [text for text in sections if text.startswith("*Component defaults*")]
    assert "lora_r=16" in defaults
    names = {entry.split("=", 1)[0] for entry in defaults.split("\n", 1)[1].split(", ")}
    assert "lora_r" in names and not names & PINNED_INPUTS
    assert "model_revision" not in defaults
    assert ".finetune/models/tiny-llama@sha256:" in texts(render_plan(plan))  # the effective pin is shown


def test_render_plan_shows_the_commands_notes(catalog: Catalog) -> None:
    command = parse_command("run recipe=SFT-TINY preset=CPU-SMALL --dry-run")
    assert isinstance(command, RunCommand)
    blocks = render_plan(catalog.plan(command), notes=command.notes)
    assert_within_limits(blocks)
    note = "recipe SFT-TINY read as sft-tiny, preset CPU-SMALL read as cpu-small: names are lower-case"
    assert texts(blocks).count(note) == 1
    assert note not in texts(render_plan(catalog.plan(command)))


def test_render_plan_shows_warnings_and_non_comparable(catalog: Catalog) -> None:
    command = parse_command("run recipe=explore-qwen-0p5b preset=gpu-8x use_peft=false")
    assert isinstance(command, RunCommand)
    text = texts(render_plan(catalog.plan(command)))
    assert "*non-comparable*" in text and "unpinned: model revision 'main'" in text
    assert "use trl-sft-distributed" in text
    assert "*Preflight memory*" in text


def test_render_plan_escapes_and_clips(catalog: Catalog) -> None:
    command = parse_command("run recipe=axolotl-qwen-7b-lora")
    assert isinstance(command, RunCommand)
    blocks = render_plan(catalog.plan(command))
    assert_within_limits(blocks)
    assert "lines)" in texts(blocks)  # the multi-line Axolotl config is summarised, not dumped


def test_render_recipes_and_presets(catalog: Catalog) -> None:
    recipes = render_recipes(catalog)
    assert_within_limits(recipes)
    text = texts(recipes)
    for name in catalog.recipes:
        assert f"*{name}*" in text
    assert "`lr` (float in (0, 0.01])" in text
    assert "resume_from" not in text  # only `/finetune resume` sets it
    presets = render_presets(catalog)
    assert_within_limits(presets)
    text = texts(presets)
    for preset in catalog.presets.values():
        assert f"*{preset.name}* — {preset.description}" in text
    assert "stack in the order given" in text


@pytest.mark.parametrize("topic", [None, *SUBCOMMANDS], ids=["all", *SUBCOMMANDS])
def test_render_help(topic: str | None) -> None:
    blocks = render_help(topic)
    assert_within_limits(blocks)
    text = texts(blocks)
    assert "not available inside Slack threads" in text and "buttons" in text
    if topic is None:
        for name in SUBCOMMANDS:
            assert f"/finetune {name}" in text
    else:
        assert blocks[0]["text"]["text"] == f"/finetune {topic}"


def test_render_command_error() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("stauts")
    blocks = render_command_error(info.value)
    assert_within_limits(blocks)
    text = texts(blocks)
    assert (
        ":x: no subcommand 'stauts'; did you mean status or outputs?" in text
        and "Did you mean `status`, `outputs`?" in text
    )
    escaped = texts(render_command_error(CommandError("bad <@U123> & co")))
    assert "&lt;@U123&gt; &amp; co" in escaped


def test_long_lists_are_split_and_capped(tmp_path: Path) -> None:
    catalog_dir = make_repo(tmp_path / "repo")
    recipe = (catalog_dir / "recipes" / "sft-tiny.yaml").read_text()
    for index in range(60):
        name = f"many-{index:02d}"
        (catalog_dir / "recipes" / f"{name}.yaml").write_text(recipe.replace("name: sft-tiny", f"name: {name}"))
    blocks = render_recipes(Catalog.load(catalog_dir))
    assert_within_limits(blocks)
    assert "more recipes than fit" in texts(blocks[-1:])


def test_usage_and_help_name_force_and_max_steps() -> None:
    assert USAGE["run"] == (
        "/finetune run recipe=NAME [preset=P[,P2…]] [dataset=NAME] [rewards=F1,F2] [base=RUN] "
        "[notify=thread|dm|both] [KEY=VALUE …] [--dry-run] [--force] [--skip-preflight]"
    )
    assert USAGE["resume"] == "/finetune resume RUN [checkpoint=latest|step-N] [max_steps=N]"
    run_help, resume_help = texts(render_help("run")), texts(render_help("resume"))
    assert "`--force`" in run_help and "approver" in run_help and "memory estimate" in run_help
    assert "lower-case" in run_help and "resume_from" in run_help
    assert "`notify=dm`" in run_help and "App Home default" in run_help
    assert "`max_steps=N`" in resume_help and "succeeded" in resume_help
    for topic in SUBCOMMANDS:
        usage = texts(render_help(topic)).splitlines()[1]
        assert usage.startswith(f"`/finetune {topic}")
