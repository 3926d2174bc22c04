"""The trainer's Polyaxon sink against the real local Polyaxon server: outputs the bot reads back from the run."""

from __future__ import annotations

import pytest

from bot.polyaxon import PolyaxonGateway
from tests.fixtures import polyaxon as plx

polyaxon_stack = plx.polyaxon_stack
gateway = plx.gateway

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]

# What CheckpointMetaCallback logs through the sink in a resumed run, then the sink's close.
JOB = """
from trainer.tracking import PolyaxonSink, init_polyaxon_run
sink = PolyaxonSink(init_polyaxon_run())
sink.log_outputs({"max_steps": 14, "resumed_from_checkpoint": "checkpoint-12", "resumed_from_step": 12})
sink.log_outputs({"checkpoint_latest": "checkpoint-14", "checkpoint_latest_step": 14,
                  "checkpoints": ["checkpoint-12", "checkpoint-14"], "checkpoint_best": "checkpoint-12",
                  "checkpoint_best_step": 12,
                  "checkpoint_digests": {"checkpoint-12": "sha256:" + "a" * 64, "checkpoint-14": "sha256:" + "b" * 64}})
sink.log_results({"global_step": 14})
sink.close()
"""


def test_checkpoint_outputs_reach_the_run_record_lists_included(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(JOB, name="sink"), name=plx.unique_name("sink-outputs"))
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=120)
    lines = [line.value for line in gateway.tail_logs(run.uuid, lines=60).lines]
    assert done.status == "succeeded", lines
    got = gateway.get_run(run.uuid, with_conditions=False).outputs
    assert got["checkpoints"] == ["checkpoint-12", "checkpoint-14"]  # a list survives log_outputs
    assert got["checkpoint_latest"] == "checkpoint-14" and got["checkpoint_latest_step"] == 14
    assert got["checkpoint_best"] == "checkpoint-12" and got["checkpoint_best_step"] == 12
    assert got["resumed_from_checkpoint"] == "checkpoint-12" and got["resumed_from_step"] == 12
    assert got["max_steps"] == 14 and got["global_step"] == 14
    # A mapping survives too: the bot reads each kept checkpoint's content digest from it.
    assert got["checkpoint_digests"] == {"checkpoint-12": "sha256:" + "a" * 64, "checkpoint-14": "sha256:" + "b" * 64}


# A lineage write the sandbox drops (a spurious 405 on the client's background request): the reference never
# lands. The sink's close reads the lineage back and logs what is missing again, blocking.
DROPPED = """
from pathlib import Path
from trainer.tracking import PolyaxonSink, init_polyaxon_run, polyaxon_outputs_path

class DroppedLineage:
    def __init__(self, run):
        self.run = run
    def __getattr__(self, name):
        return getattr(self.run, name)
    def log_artifact_ref(self, **kwargs):
        pass  # the background write that never landed

outputs = polyaxon_outputs_path()
outputs.mkdir(parents=True, exist_ok=True)
results = outputs / "eval_results.json"
results.write_text('{"eval_loss": 1.0}')
sink = PolyaxonSink(DroppedLineage(init_polyaxon_run()))
sink.log_artifact(results, "eval_results", "file")
sink.close()
"""


def test_a_dropped_lineage_reference_is_logged_again_at_close(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(DROPPED, name="lineage"), name=plx.unique_name("sink-lineage"))
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=120)
    lines = [line.value for line in gateway.tail_logs(run.uuid, lines=60).lines]
    assert done.status == "succeeded", lines
    lineage = {a.name: a for a in gateway.lineage(run.uuid)}
    assert "eval_results" in lineage, sorted(lineage)
    assert str(lineage["eval_results"].path).endswith("eval_results.json")
    assert lineage["eval_results"].summary.get("hash"), lineage["eval_results"].summary
    assert any("logged eval_results again" in line for line in lines), lines


# What `python -m trainer.preflight` logs on node 0 inside a Polyaxon run, once its report is written.
PREFLIGHT = """
from trainer.digests import write_json_atomic
from trainer.preflight import log_to_polyaxon
from trainer.tracking import polyaxon_outputs_path

outputs = polyaxon_outputs_path()
outputs.mkdir(parents=True, exist_ok=True)
report = {"version": 1, "passed": False, "wall_s": 41.5, "expected_world_size": 4, "lines": []}
path = outputs / "preflight_report.json"
write_json_atomic(path, report)
log_to_polyaxon(report, path)
"""


def test_the_preflight_verdict_and_report_reach_the_run(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(PREFLIGHT, name="preflight"), name=plx.unique_name("preflight"))
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=120)
    lines = [line.value for line in gateway.tail_logs(run.uuid, lines=60).lines]
    assert done.status == "succeeded", lines
    got = gateway.get_run(run.uuid, with_conditions=False).outputs
    assert got["preflight_passed"] is False
    assert got["preflight_wall_s"] == 41.5 and got["preflight_world_size"] == 4
    lineage = {a.name: a for a in gateway.lineage(run.uuid)}
    assert str(lineage["preflight_report"].path).endswith("preflight_report.json"), sorted(lineage)


# The sandbox's spurious 405 on an overlapping write, met by the real Polyaxon client inside the job: its first
# PATCH of the run (log_outputs) is answered 405 by a proxy in front of the real server, the retry lands.
RETRIED = """
import os, time
from bot.local.polyaxon.proxy import CountingProxy
proxy = CountingProxy(os.environ["POLYAXON_HOST"]).__enter__()
os.environ["POLYAXON_HOST"] = proxy.host  # read by Polyaxon's settings when tracking first imports them
from trainer.tracking import PolyaxonSink, init_polyaxon_run
sink = PolyaxonSink(init_polyaxon_run())
sink.log_outputs({"landed": 1})  # in the client's background: wait until it went through
patches = lambda: sum(1 for method, _ in proxy.requests if method == "PATCH")
while patches() < 1:
    time.sleep(0.05)
proxy.answer_next("PATCH", 405)  # the close's blocking resend meets it, and is retried
sink.close()
print("PATCHES", patches())
"""


def test_a_write_that_is_retried_and_lands_leaves_no_error_in_the_run_log(gateway: PolyaxonGateway) -> None:
    run = gateway.submit(plx.python_operation(RETRIED, name="retried"), name=plx.unique_name("sink-retried"))
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=120)
    lines = [line.value for line in gateway.tail_logs(run.uuid, lines=200).lines]
    assert done.status == "succeeded", lines
    assert gateway.get_run(run.uuid, with_conditions=False).outputs.get("landed") == 1
    # What `/finetune logs` shows of a healthy run: no client error, no warning for a write that landed.
    noisy = [line for line in lines if "405" in line or "ERROR" in line or "failed" in line]
    assert not noisy, lines
    assert any(line.startswith("PATCHES") and int(line.split()[1]) >= 3 for line in lines), lines  # 405, then landed
