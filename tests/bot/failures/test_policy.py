"""Retry decisions, the recipe's retry and start-deadline fields, hints and where final failures are told."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.catalog.policy import RetrySpec, duration_s, run_policy
from bot.failures import Failure, attempts_allowed, decide_retry, notify_channel
from bot.failures.render import hint
from bot.settings import FinetuneSettings

POLICY = {"retry": {"max": 2, "on": ["preempted", "node_lost", "oom_host"]}}


def test_a_retried_class_with_budget_left_is_due_from_the_checkpoint() -> None:
    decision = decide_retry(POLICY, "preempted", attempt=1, checkpoint_step=20)
    assert decision.retry == "due" and decision.next_attempt == 2
    assert "attempt 2/3" in decision.why and "checkpoint-20" in decision.why


def test_without_a_checkpoint_the_retry_starts_from_the_beginning() -> None:
    decision = decide_retry(POLICY, "node_lost", attempt=2, checkpoint_step=None)
    assert decision.retry == "due" and decision.next_attempt == 3 and "from the beginning" in decision.why


def test_the_budget_is_never_exceeded() -> None:
    decision = decide_retry(POLICY, "preempted", attempt=3, checkpoint_step=40)
    assert decision.retry == "no" and "3/3" in decision.why


@pytest.mark.parametrize("kind", ["code", "data", "nan", "dependency", "oom_cuda", "unknown"])
def test_the_runs_own_faults_are_never_retried_even_if_listed(kind: str) -> None:
    policy = {"retry": {"max": 5, "on": ["preempted", kind]}}  # stored by an older bot, say: still refused
    decision = decide_retry(policy, kind, attempt=1, checkpoint_step=10)
    assert decision.retry == "no" and "never retried" in decision.why


def test_no_policy_no_retry() -> None:
    assert decide_retry(None, "preempted", attempt=1, checkpoint_step=10).retry == "no"
    assert attempts_allowed(None) == 1 and attempts_allowed(POLICY) == 3


def test_a_recipe_may_not_retry_code_errors_and_names_what_it_may() -> None:
    with pytest.raises(ValidationError, match="code is never retried"):
        RetrySpec(max=2, on=["preempted", "code"])
    with pytest.raises(ValidationError, match="preempted, node_lost"):
        RetrySpec(max=2, on=["preemted"])
    with pytest.raises(ValidationError):
        RetrySpec(max=0, on=["preempted"])


def test_durations_and_the_shortest_start_deadline_wins() -> None:
    assert duration_s("90s") == 90 and duration_s("10m") == 600 and duration_s("2h") == 7200 and duration_s(5) == 5
    for bad in ("soon", "-3m", 0, True):
        with pytest.raises(ValueError):
            duration_s(bad)
    policy = run_policy(
        retry=RetrySpec(max=1, on=["preempted"]),
        max_pending="30m",
        notify=None,
        preset_max_pending=[("gpu-1x", "10m")],
    )
    assert policy == {
        "retry": {"max": 1, "on": ["preempted"]},
        "max_pending_s": 600.0,
        "max_pending_from": "preset gpu-1x",
    }
    assert run_policy(retry=None, max_pending=None, notify=None, preset_max_pending=[]) == {}


def test_hints_use_the_runs_own_numbers() -> None:
    params = {"per_device_train_batch_size": 8, "learning_rate": 3e-3}
    cuda = hint(Failure("oom_cuda", "CUDA out of memory"), params=params, presets=["gpu-1x"], recipe="sft-lora")
    assert "batch_size=4" in cuda and "--dry-run" in cuda
    nan = hint(Failure("nan", "'loss': nan"), params=params, presets=[], recipe="sft-tiny")
    assert "lr=0.0003" in nan
    host = hint(Failure("oom_host", "OOMKilled"), params=params, presets=["cpu-small"], recipe="sft-tiny")
    assert "cpu-small" in host


def test_failures_are_routed_by_the_recipe_then_by_finetune_notify() -> None:
    settings = FinetuneSettings(notify="sft-*=C0ALERTS1, C0DEFAULT1")
    routes = settings.notify_routes
    assert routes == [("sft-*", "C0ALERTS1"), ("*", "C0DEFAULT1")]
    assert notify_channel(routes, "sft-tiny", None) == "C0ALERTS1"
    assert notify_channel(routes, "quickstart", None) == "C0DEFAULT1"
    assert notify_channel(routes, "sft-tiny", {"notify": "C0OWNTEAM"}) == "C0OWNTEAM"
    assert notify_channel([], "sft-tiny", None) is None
    with pytest.raises(ValidationError, match="channel ID"):
        FinetuneSettings(notify="sft-*=#alerts")


def test_a_bare_yaml_on_key_means_on() -> None:
    import yaml

    spec = RetrySpec.model_validate(yaml.safe_load("{max: 2, on: [preempted, node_lost]}"))
    assert spec.on == ["preempted", "node_lost"]


def test_only_conditions_that_say_why_a_run_waits_are_told() -> None:
    from bot.failures import informative

    assert not informative("created", "OperationServiceInit", "Run is created")
    assert not informative("queued", "SchedulerPrepare", "Run is queued")
    assert not informative("running", "LocalAgent", None)
    assert informative("unschedulable", "PodUnschedulable", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu")
    assert informative("warning", None, 'Back-off pulling image "ghcr.io/acme/trainer@sha256:dead"')
    assert informative("queued", "ImagePullBackOff", "Back-off pulling image")


@pytest.mark.parametrize(
    ("kind", "reason", "message", "told"),
    [
        ("scheduled", "AgentController", "Operation is scheduled", False),
        ("starting", "OperatorController", "Operation is starting", False),
        ("running", "OperatorController", "Operation is running", False),
        ("succeeded", "OperatorController", "Operation has succeeded", False),
        ("stopped", "OperatorFinalizer", "Operation stopped in finalizer", False),
        # Someone stopped it in Polyaxon: worth saying with the transition.
        ("stopping", "StateManager", "Run is stopping; User requested to stop the run.", True),
        # kubelet's Ready condition while the init containers run, relayed by the operator on every run.
        ("warning", "ContainersNotReady", "containers with unready status: [polyaxon-main polyaxon-sidecar]", False),
        ("warning", "PodPending", "Pod is still pending without conditions", False),
        # The scheduler's message under the same reason, a pull back-off, a failed attempt Kubernetes retries.
        ("warning", "ContainersNotReady", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", True),
        ("warning", "ImagePullBackOff", 'Back-off pulling image "ghcr.io/acme/trainer@sha256:dead"', True),
        ("warning", "InitContainerImagePullBackOff", 'Back-off pulling image "polyaxon/polyaxon-init:2.18"', True),
        ("warning", "OperatorController", "Underlaying job has an issue", True),
        ("warning", "OperatorCreateJob", 'admission webhook "quota.example.com" denied the request', True),
    ],
)
def test_the_operator_s_routine_steps_are_not_reasons_to_wait(kind: str, reason: str, message: str, told: bool) -> None:
    from bot.failures import informative

    assert informative(kind, reason, message) is told
