"""A team's own dataset, checked whole when the catalog loads: a bad row, a line that is not JSON or a missing split
refuses the recipes on it when they are planned (naming the file and line), `manifests check` says it once, the
rest of the catalog plans, and a second load of unchanged data reads no row again."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.catalog import Catalog, PlanError, check_catalog
from bot.catalog.datasets import RowCache
from tests.bot.catalog.planning import plan
from tests.manifests.catalog_repo import add_team_dataset, team_rows, write

LINE_10 = '{"prompt": "only a prompt"}'


def _refusal(catalog: Catalog, text: str) -> str:
    with pytest.raises(PlanError) as info:
        plan(catalog, text)
    return info.value.message


def test_a_bad_row_on_line_10_refuses_the_recipe_and_nothing_else(fresh_dir: Path) -> None:
    rows = team_rows()
    rows[9] = LINE_10
    add_team_dataset(fresh_dir, train=rows)
    catalog = Catalog.load(fresh_dir)  # the rest of the catalog loads
    said = _refusal(catalog, "run recipe=sft-team-faq --dry-run")
    assert (
        'manifests/datasets/team-qa/train.jsonl:10: a prompt_completion row needs "completion" (a string); the row '
        'has only "prompt"'
    ) in said, said
    assert "nothing was submitted" in said
    assert plan(catalog, "run recipe=sft-tiny --dry-run").recipe == "sft-tiny"
    problems = check_catalog(fresh_dir)
    assert sum("train.jsonl:10" in p for p in problems) == 1, problems  # once, not once per preset
    assert any(p.startswith("sft-team-faq: cannot run on its data; every preset refuses it") for p in problems)


def test_a_line_that_is_not_json_is_named_with_its_line_and_column(fresh_dir: Path) -> None:
    rows = team_rows()
    rows[1] = '{"prompt": "x", "completion": '
    add_team_dataset(fresh_dir, train=rows)
    said = _refusal(Catalog.load(fresh_dir), "run recipe=sft-team-faq")
    assert "manifests/datasets/team-qa/train.jsonl:2:31: not JSON: unexpected end of data" in said, said
    problems = check_catalog(fresh_dir)  # no traceback: a list of problems, the file and line in it
    assert any("train.jsonl:2:31" in p for p in problems), problems


def test_a_missing_split_refuses_the_recipe_that_evaluates_on_it(fresh_dir: Path) -> None:
    add_team_dataset(fresh_dir, with_eval=False)
    said = _refusal(Catalog.load(fresh_dir), "run recipe=sft-team-faq --dry-run")
    assert "dataset team-qa has no split 'eval': manifests/datasets/team-qa/eval.jsonl is missing" in said, said
    assert "recipe sft-team-faq evaluates on it" in said
    problems = check_catalog(fresh_dir)
    assert [p for p in problems if "eval.jsonl is missing" in p] and len(problems) == 1, problems


def test_a_sweep_and_a_preflight_are_refused_on_it_too(fresh_dir: Path) -> None:
    rows = team_rows()
    rows[9] = LINE_10
    add_team_dataset(fresh_dir, train=rows)
    catalog = Catalog.load(fresh_dir)
    from bot.grammar import RunCommand, SweepCommand, parse_command

    sweep = parse_command("sweep recipe=sft-team-faq lr=1e-3,2e-3")
    assert isinstance(sweep, SweepCommand)
    with pytest.raises(PlanError, match=r"train\.jsonl:10"):
        catalog.plan_sweep(sweep)
    with pytest.raises(PlanError, match=r"train\.jsonl:10"):
        catalog.plan_preflight(RunCommand(recipe="sft-team-faq"))


def test_a_fixed_row_is_taken_and_unchanged_data_is_not_read_again(fresh_dir: Path) -> None:
    rows = team_rows()
    rows[9] = LINE_10
    folder = add_team_dataset(fresh_dir, train=rows)
    cache = RowCache()
    Catalog.load(fresh_dir, rows=cache)
    read = cache.checked
    assert read >= 2
    Catalog.load(fresh_dir, rows=cache)
    assert cache.checked == read  # nothing changed: no file read and checked again
    (folder / "train.jsonl").write_text("\n".join(team_rows()) + "\n", encoding="utf-8")
    fixed = Catalog.load(fresh_dir, rows=cache)
    assert cache.checked == read + 1  # only the changed file
    assert plan(fixed, "run recipe=sft-team-faq --dry-run").recipe == "sft-team-faq"


def test_a_recipe_s_own_local_folder_is_checked_whole_too(fresh_dir: Path) -> None:
    rows = team_rows()
    rows[9] = LINE_10
    add_team_dataset(fresh_dir, train=rows, recipe=False)
    (fresh_dir / "datasets" / "team-qa.yaml").unlink()  # no catalog entry: the recipe names the folder itself
    base = (fresh_dir / "recipes" / "sft-tiny.yaml").read_text(encoding="utf-8")
    start, end = base.index("dataset:"), base.index("eval:")
    text = base[:start] + "dataset: {path: manifests/datasets/team-qa, split: train}\n" + base[end:]
    text = text.replace("name: sft-tiny\n", "name: sft-team-own\n", 1)
    write(fresh_dir, "recipes/sft-team-own.yaml", text[: text.index("serving:")] + text[text.index("defaults:") :])
    said = _refusal(Catalog.load(fresh_dir), "run recipe=sft-team-own --dry-run")
    assert "manifests/datasets/team-qa/train.jsonl:10: a prompt_completion row needs" in said, said


def test_an_unknown_key_gets_the_closest_names(fresh_dir: Path) -> None:
    base = (fresh_dir / "recipes" / "sft-tiny.yaml").read_text(encoding="utf-8")
    write(fresh_dir, "recipes/sft-tiny.yaml", base.replace("component: trl-sft", "component: trl-sft\ntrainr: sft"))
    problems = check_catalog(fresh_dir)
    assert (
        len(problems) == 1
        and "recipes/sft-tiny.yaml: trainr: unknown key 'trainr'; did you mean trainer?" in (problems[0])
    ), problems
