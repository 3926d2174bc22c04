"""PolyaxonGateway against the live local Polyaxon server and process agent (no mocks)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.polyaxon import GatewayError, PolyaxonGateway, RunNotFoundError
from tests.fixtures import polyaxon as plx

pytestmark = pytest.mark.polyaxon

polyaxon_stack = plx.polyaxon_stack
gateway = plx.gateway

TRACKED = """
import os, sys
from polyaxon import tracking
tracking.init()
steps = int({{ steps }})
for step in range(steps):
    tracking.log_metrics(step=step, loss=1.0 / (step + 1), accuracy=step / steps)
    print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
with open(os.path.join(tracking.get_outputs_path(), "result.txt"), "w") as f:
    f.write("trained")
checkpoint = os.path.join(tracking.get_outputs_path(), "checkpoint-final")
os.makedirs(checkpoint, exist_ok=True)
open(os.path.join(checkpoint, "model.bin"), "w").write("weights")
tracking.log_model(path=checkpoint, name="checkpoint-final", framework="pytorch", step=steps)
print("wrote result", file=sys.stderr, flush=True)
"""

FAILING = """
print("loading data", flush=True)
print("about to fail", flush=True)
raise ValueError("boom: dataset missing")
"""

# Ignores SIGTERM, so the agent has to SIGKILL it after the grace period.
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, lambda *a: print("ignoring SIGTERM", flush=True))
print("started", flush=True)
while True:
    time.sleep(0.2)
"""

SLEEPER = "import time; print('sleeping', flush=True); time.sleep(600)"


@pytest.fixture(scope="module")
def tracked_run(gateway: PolyaxonGateway) -> str:
    """One run of the tracked component, finished: its uuid."""
    run = gateway.submit(
        plx.python_operation(TRACKED, name="tracked", inputs={"steps": 7}),
        name=plx.unique_name("tracked"),
        tags=["test", "gateway"],
        description="gateway integration test",
    )
    assert run.status in {"created", "compiled", "queued"}
    plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=90)
    return run.uuid


def test_submitted_run_goes_queued_running_succeeded(gateway: PolyaxonGateway, tracked_run: str) -> None:
    run = gateway.get_run(tracked_run)
    assert run.status == "succeeded", run.conditions
    seen = [c.type for c in run.conditions]
    for status in ("queued", "starting", "running", "succeeded"):
        assert status in seen
    assert seen.index("queued") < seen.index("running") < seen.index("succeeded")
    assert run.inputs == {"steps": 7}
    assert set(run.tags) == {"test", "gateway"}
    assert run.created_at is not None and run.created_at.tzinfo is not None
    assert run.started_at is not None and run.finished_at is not None
    assert run.created_at <= run.started_at <= run.finished_at
    assert run.is_done


def test_metrics_are_visible_through_the_api(gateway: PolyaxonGateway, tracked_run: str) -> None:
    last = gateway.last_metrics(tracked_run)
    assert last["loss"] == pytest.approx(1.0 / 7)
    assert last["accuracy"] == pytest.approx(6 / 7)
    history = gateway.metric_history(tracked_run, ["loss", "accuracy"], max_points=3)
    loss = history["loss"]
    assert 2 <= len(loss) <= 3
    assert loss[0].step == 0 and loss[0].value == pytest.approx(1.0)
    assert loss[-1].step == 6 and loss[-1].value == pytest.approx(1.0 / 7)
    full = gateway.metric_history(tracked_run, ["loss"], max_points=100)["loss"]
    assert [p.step for p in full] == list(range(7))
    # The last values also land in the run's outputs (the agent's summary sync).
    assert gateway.get_run(tracked_run).outputs["loss"] == pytest.approx(1.0 / 7)


def test_logs_tail_and_cursor(gateway: PolyaxonGateway, tracked_run: str) -> None:
    tail = gateway.tail_logs(tracked_run, lines=3)
    values = [line.value for line in tail.lines]
    assert len(values) == 3
    assert "step 6 loss 0.1429" in values
    assert "wrote result" in values  # stderr is captured too
    assert tail.cursor is not None
    everything = gateway.tail_logs(tracked_run, lines=1000)
    assert next(line.value for line in everything.lines if line.value.startswith("step ")) == "step 0 loss 1.0000"
    assert gateway.tail_logs(tracked_run, lines=10, since=tail.cursor).lines == []


def test_outputs_and_lineage(gateway: PolyaxonGateway, polyaxon_stack: LocalPolyaxonStack, tracked_run: str) -> None:
    assert (Path(polyaxon_stack.store) / tracked_run / "outputs" / "result.txt").read_text() == "trained"
    kinds = {(a.name, a.kind) for a in gateway.lineage(tracked_run)}
    assert ("loss", "metric") in kinds and ("accuracy", "metric") in kinds
    assert {a.name for a in gateway.lineage(tracked_run, kind="metric")} == {"loss", "accuracy"}
    (model,) = gateway.lineage(tracked_run, kind="model")
    assert model.name == "checkpoint-final"
    assert (Path(polyaxon_stack.store) / tracked_run / "outputs" / "checkpoint-final" / "model.bin").exists()


def test_submit_is_idempotent_on_the_run_name(gateway: PolyaxonGateway, tracked_run: str) -> None:
    name = gateway.get_run(tracked_run).name
    again = gateway.submit(plx.python_operation("print('never runs')"), name=name)
    assert again.uuid == tracked_run
    assert len(gateway.list_runs(query=f"name:{name}")) == 1


def test_failing_command_fails_with_its_last_log_lines(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(FAILING, name="failing"), name=plx.unique_name("failing"))
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=60)
    assert done.status == "failed"
    failed = [c for c in gateway.get_run(run.uuid).conditions if c.type == "failed"][-1]
    # As the operator words it: the Job's backoff limit, then the failed pod's main container with its termination
    # message (kubelet's fallback to the log's last lines: terminationMessagePolicy FallbackToLogsOnError).
    assert failed.reason == "BackoffLimitExceeded"
    assert failed.message is not None and "ValueError: boom: dataset missing" in failed.message
    assert failed.message.startswith("Job has reached the specified backoff limit (Pod: <reason: ErrorExitCode 1, ")
    tail = [line.value for line in gateway.tail_logs(run.uuid, lines=4).lines]
    assert tail[-1] == "ValueError: boom: dataset missing"
    assert "about to fail" in [line.value for line in gateway.tail_logs(run.uuid, lines=50).lines]


# Writes its own termination message where kubelet reads it (the local agent names the file), then exits 3.
TELLS_WHY = """
import os, pathlib, sys
print("checking the dataset", flush=True)
pathlib.Path(os.environ["FINETUNE_TERMINATION_LOG"]).write_text("DatasetError: split 'eval' is missing")
sys.exit(3)
"""


def test_a_job_s_termination_message_is_relayed_as_the_operator_does_and_none_without_one(
    gateway: PolyaxonGateway,
) -> None:
    told = gateway.submit(plx.python_operation(TELLS_WHY, name="tells"), name=plx.unique_name("tells"))
    # Kubernetes' default policy (File), and nothing written: the operator appends no pod to the Job's message.
    silent = gateway.submit(
        plx.python_operation(
            "import sys; print('quietly', flush=True); sys.exit(5)", name="silent", message_policy=None
        ),
        name=plx.unique_name("silent"),
    )
    for run, expected in (
        (told, "Job has reached the specified backoff limit (Pod: <reason: ErrorExitCode 3, message DatasetError: "
         "split 'eval' is missing)"),
        (silent, "Job has reached the specified backoff limit"),
    ):  # fmt: skip
        plx.wait_for_status(gateway, run.uuid, {"failed", "succeeded"}, timeout_s=60)
        failed = [c for c in gateway.get_run(run.uuid).conditions if c.type == "failed"][-1]
        assert (failed.reason, failed.message) == ("BackoffLimitExceeded", expected), failed


def test_a_job_past_its_deadline_fails_as_the_job_controller_says(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(SLEEPER, name="late", timeout_s=2), name=plx.unique_name("late"))
    done = plx.wait_for_status(gateway, run.uuid, {"failed", "succeeded", "stopped"}, timeout_s=60)
    failed = [c for c in gateway.get_run(done.uuid).conditions if c.type == "failed"]
    assert [(c.reason, c.message) for c in failed] == [
        ("DeadlineExceeded", "Job was active longer than specified deadline")
    ], gateway.get_run(done.uuid).conditions


def test_stop_kills_a_run_that_ignores_sigterm_within_the_grace_period(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(STUBBORN, name="stubborn"), name=plx.unique_name("stubborn"))
    plx.wait_for_status(gateway, run.uuid, {"running"}, timeout_s=60)
    _wait_for_log(gateway, run.uuid, "started")
    asked = time.monotonic()
    gateway.stop(run.uuid)
    gateway.stop(run.uuid)  # a repeated stop is harmless
    # Agent poll (<= 3 s) + grace period + status write.
    stopped = plx.wait_for_status(gateway, run.uuid, {"stopped"}, timeout_s=plx.STOP_GRACE_S + 12, interval_s=0.25)
    elapsed = time.monotonic() - asked
    assert stopped.status == "stopped"
    assert elapsed >= plx.STOP_GRACE_S - 0.5  # it really waited for the grace period before SIGKILL
    assert "ignoring SIGTERM" in [line.value for line in gateway.tail_logs(run.uuid, lines=20).lines]


def test_copy_run_starts_with_the_parent_artifacts(gateway: PolyaxonGateway, tracked_run: str) -> None:
    reader = """
import os
from polyaxon import tracking
tracking.init()
outputs = tracking.get_outputs_path()
print("found", open(os.path.join(outputs, "result.txt")).read(), flush=True)
"""
    name = plx.unique_name("copy")
    child = gateway.copy_run(tracked_run, name=name, operation=plx.python_operation(reader, name="reader"))
    assert child.uuid != tracked_run
    assert gateway.copy_run(tracked_run, name=name).uuid == child.uuid  # idempotent on the name
    done = plx.wait_for_status(gateway, child.uuid, {"succeeded", "failed"}, timeout_s=60)
    logs = [line.value for line in gateway.tail_logs(child.uuid, lines=50).lines]
    assert done.status == "succeeded", logs
    assert "found trained" in logs
    assert done.original_uuid == tracked_run


def test_list_active_runs_is_one_request_per_page_and_sees_every_run(
    gateway: PolyaxonGateway, polyaxon_stack: LocalPolyaxonStack
) -> None:
    uuids = [
        gateway.submit(plx.python_operation(SLEEPER, name="sleeper"), name=plx.unique_name(f"active{i}")).uuid
        for i in range(3)
    ]
    try:
        with plx.CountingProxy(polyaxon_stack.host) as proxy:
            counted = PolyaxonGateway(host=proxy.host, token=None, project=plx.PROJECT)
            active = counted.list_active_runs()
            assert len(proxy.requests) == 1, proxy.requests
            assert proxy.requests[0][0] == "GET"
            # Past a page, the next page: every active run is seen (none beyond a limit looks ended).
            proxy.requests.clear()
            paged = counted.list_active_runs(page_size=2)
            assert {run.uuid for run in paged} == {run.uuid for run in active}
            assert len(proxy.requests) == len(active) // 2 + 1, proxy.requests
            counted.close()
        assert set(uuids) <= {run.uuid for run in active}
        assert all(not run.is_done for run in active)
    finally:
        for uuid in uuids:
            gateway.stop(uuid)
    for uuid in uuids:
        plx.wait_for_status(gateway, uuid, {"stopped"}, timeout_s=plx.STOP_GRACE_S + 20)
    assert not set(uuids) & {run.uuid for run in gateway.list_active_runs()}


def test_model_version_registered_from_a_run_and_read_back(gateway: PolyaxonGateway, tracked_run: str) -> None:
    version = plx.unique_name("tiny-sft-v")
    registered = gateway.register_model_version(
        version,
        run_uuid=tracked_run,
        artifacts=["loss", "accuracy"],
        description="registered by the gateway test",
        tags=["approved"],
        content={"recipe": "sft-tiny", "eval_loss": 0.14},
    )
    assert registered.name == version
    assert registered.run_uuid == tracked_run
    assert registered.stage == "testing"
    back = gateway.get_model_version(version)
    assert back.run_uuid == tracked_run
    assert set(back.artifacts) == {"loss", "accuracy"}
    assert back.content == {"recipe": "sft-tiny", "eval_loss": 0.14}
    staged = gateway.stage_model_version(version, "staging", reason="BotApproval", message="approved by U2")
    assert staged.stage == "staging"


def test_unknown_run_is_not_found(gateway: PolyaxonGateway) -> None:
    with pytest.raises(RunNotFoundError):
        gateway.get_run("0" * 32)


def test_submit_refuses_what_is_not_an_operation(gateway: PolyaxonGateway) -> None:
    with pytest.raises(GatewayError, match="compiled operation"):
        gateway.submit({"kind": "component"}, name=plx.unique_name("bad"))


def test_server_down_is_a_clear_gateway_error_not_a_hang() -> None:
    closed = plx.free_closed_port_host()
    started = time.monotonic()
    with pytest.raises(GatewayError, match="unreachable"):
        PolyaxonGateway(host=closed, token=None, timeout_s=2).get_run("0" * 32)
    assert time.monotonic() - started < 5
    with plx.BlackHole() as hole:
        started = time.monotonic()
        with pytest.raises(GatewayError, match="did not answer within 1 s"):
            PolyaxonGateway(host=hole.host, token=None, timeout_s=1).list_active_runs()
        assert time.monotonic() - started < 5


def _wait_for_log(gw: PolyaxonGateway, uuid: str, text: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in [line.value for line in gw.tail_logs(uuid, lines=50).lines]:
            return
        time.sleep(0.3)
    raise AssertionError(f"{text!r} never appeared in the logs of {uuid}")


def test_copy_run_with_params_reuses_the_parent_spec(gateway: PolyaxonGateway, tracked_run: str) -> None:
    child = gateway.copy_run(tracked_run, name=plx.unique_name("copyparams"), params={"steps": 2})
    done = plx.wait_for_status(gateway, child.uuid, {"succeeded", "failed"}, timeout_s=60)
    assert done.status == "succeeded"
    assert done.inputs == {"steps": 2}
    assert gateway.last_metrics(child.uuid)["loss"] == pytest.approx(0.5)
