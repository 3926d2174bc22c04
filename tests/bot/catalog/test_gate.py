"""The smoke-first gate and the preflight's compile step, on the shipped catalog."""

from __future__ import annotations

import pytest

from bot.catalog import Catalog, PassedPreflight, PlanError, check_gate, preflight_command
from bot.catalog.gate import gate_key
from bot.grammar import RunCommand


def plan(catalog: Catalog, recipe: str, **kwargs: object):  # type: ignore[no-untyped-def]
    return catalog.plan(RunCommand(recipe=recipe, **kwargs), require_local=False)  # type: ignore[arg-type]


def test_single_process_runs_pass_the_gate(catalog: Catalog) -> None:
    tiny = plan(catalog, "sft-tiny")
    assert not tiny.distributed and tiny.gate_key == "" and tiny.expected_world_size == 1
    assert check_gate(tiny, None, skip=False, skipper=None, command="x").allowed


def test_a_distributed_run_is_refused_naming_the_preflight_to_run(catalog: Catalog) -> None:
    ddp = plan(catalog, "sft-tiny-ddp", overrides={"lr": 0.001}, written={"lr": "1e-3"})
    assert ddp.distributed and ddp.expected_world_size == 2 and ddp.gate_key.startswith("sha256:")
    command = preflight_command(ddp, {"lr": 0.001}, {"lr": "1e-3"})
    assert command == "/finetune preflight recipe=sft-tiny-ddp preset=ddp-cpu-2 lr=1e-3"
    verdict = check_gate(ddp, None, skip=False, skipper=None, command=command)
    assert not verdict.allowed and verdict.refusal is not None
    assert command in verdict.refusal and "--skip-preflight" in verdict.refusal
    assert "checkpoint recovery" in verdict.refusal and "2 ranks" in verdict.refusal


def test_a_passed_preflight_validates_and_a_skip_waits_for_approval(catalog: Catalog) -> None:
    ddp = plan(catalog, "sft-tiny-ddp")
    passed = PassedPreflight(run_name="sft-tiny-ddp-preflight-1", finished_at="2026-12-03T10:00:00+00:00")
    ok = check_gate(ddp, passed, skip=False, skipper=None, command="x")
    assert ok.allowed and ok.validation is not None and ok.validation["state"] == "validated"
    assert ok.validation["preflight"] == "sft-tiny-ddp-preflight-1"
    skipped = check_gate(ddp, None, skip=True, skipper="UAPPROVER", command="x")
    assert not skipped.allowed, "a skip is an approval of other approvers, never granted by the gate"
    assert skipped.validation == {"state": "awaiting_approval", "requested_by": "UAPPROVER", "command": "x"}


def test_the_gate_key_changes_with_pins_presets_and_memory_params_only(catalog: Catalog) -> None:
    ddp = plan(catalog, "sft-tiny-ddp")
    same = plan(catalog, "sft-tiny-ddp", overrides={"lr": 0.001})
    assert same.gate_key == ddp.gate_key, "the learning rate does not change what a preflight validated"
    bigger = plan(catalog, "sft-tiny-ddp", overrides={"batch_size": 16})
    assert bigger.gate_key != ddp.gate_key, "the batch size changes the memory a preflight measured"
    other_image = {**ddp.pins, "image": "ghcr.io/x/trainer@sha256:" + "0" * 64}
    assert gate_key(ddp.recipe, other_image, ddp.presets, ddp.params) != ddp.gate_key
    assert gate_key(ddp.recipe, ddp.pins, ["ddp-2x8"], ddp.params) != ddp.gate_key


def test_the_local_preflight_is_a_job_with_the_master_replicas_settings(catalog: Catalog) -> None:
    preflight = catalog.plan_preflight(RunCommand(recipe="sft-tiny-ddp"), require_local=False)
    run = plan(catalog, "sft-tiny-ddp")
    assert preflight.kind == "preflight" and preflight.component == "trl-preflight"
    assert preflight.gate_key == run.gate_key
    assert preflight.resources["run_kind"] == "job"
    assert preflight.operation["runPatch"]["container"]["resources"]["limits"]["memory"] == "8Gi"
    params = preflight.params
    assert (params["expected_world_size"], params["nnodes"], params["nproc_per_node"]) == (2, 1, "2")
    assert params["preflight_steps"] == 3 and params["memory_estimate_bytes"] > 0
    assert params["memory_limit_bytes"] == 4 * 1024**3  # 8 GiB shared by 2 processes
    assert params["model_name_or_path"] == run.params["model_name_or_path"]


def test_a_cluster_preflight_is_a_pytorchjob_with_every_replica(catalog: Catalog) -> None:
    preflight = catalog.plan_preflight(RunCommand(recipe="sft-qwen-1p5b-ddp"), require_local=False)
    assert preflight.component == "trl-preflight-distributed" and preflight.resources["run_kind"] == "pytorchjob"
    assert preflight.params["expected_world_size"] == 16 and preflight.params["nnodes"] == 2
    assert preflight.params["nproc_per_node"] == "8"


def test_a_single_process_recipe_has_no_preflight(catalog: Catalog) -> None:
    with pytest.raises(PlanError) as err:
        catalog.plan_preflight(RunCommand(recipe="sft-tiny"), require_local=False)
    assert "distributed recipes only" in err.value.message and "/finetune outputs RUN" in err.value.message
