"""What a job sees when the local agent runs it: interpreter, HOME, Polyaxon context, connections."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.polyaxon import PolyaxonGateway
from tests.fixtures import polyaxon as plx

pytestmark = pytest.mark.polyaxon

PROBE = """
import json, os, sys
from polyaxon import tracking
tracking.init()
catalog = json.loads(os.environ["POLYAXON_CONNECTIONS_CATALOG"])["connections"]
mount = [c["schema"]["mountPath"] for c in catalog if c["name"] == "model-cache"][0]
open(os.path.join(mount, "probe.txt"), "w").write("cached")
print("PROBE " + json.dumps({
    "executable": sys.executable,
    "prefix": sys.prefix,
    "home": os.environ["HOME"],
    "home_entries": os.listdir(os.environ["HOME"]),
    "cwd": os.getcwd(),
    "run_instance": os.environ.get("POLYAXON_RUN_INSTANCE"),
    "no_config": os.environ.get("POLYAXON_NO_CONFIG"),
    "tracked_run": tracking.TRACKING_RUN.run_uuid,
    "outputs": tracking.get_outputs_path(),
    "model_cache": mount,
    "slack_token": os.environ.get("SLACK_BOT_TOKEN"),
    "omp_threads": os.environ.get("OMP_NUM_THREADS"),
    "hf_home": os.environ.get("HF_HOME"),
}), flush=True)
"""


def _probe(gateway: PolyaxonGateway) -> tuple[str, dict[str, Any]]:
    operation = plx.python_operation(PROBE, name="probe")
    operation["component"]["run"]["connections"] = ["model-cache"]
    run = gateway.submit(operation, name=plx.unique_name("probe"))
    done = plx.wait_for_status(gateway, run.uuid, {"succeeded", "failed"}, timeout_s=60)
    lines = [line.value for line in gateway.tail_logs(run.uuid, lines=100).lines]
    assert done.status == "succeeded", lines
    probe = next(line for line in lines if line.startswith("PROBE "))
    return run.uuid, json.loads(probe.removeprefix("PROBE "))


@pytest.fixture(scope="module")
def probe(gateway: PolyaxonGateway) -> tuple[str, dict[str, Any]]:
    """One probe run, finished: its uuid and what it saw."""
    return _probe(gateway)


def test_python_in_a_command_is_the_bots_interpreter(probe: tuple[str, dict[str, Any]]) -> None:
    _, seen = probe
    assert seen["executable"] == sys.executable
    assert seen["prefix"] == sys.prefix


def test_a_job_attaches_tracking_to_its_own_run_with_a_clean_home(
    probe: tuple[str, dict[str, Any]], polyaxon_stack: LocalPolyaxonStack
) -> None:
    uuid, seen = probe
    assert seen["tracked_run"] == uuid
    assert seen["run_instance"] == f"default.{plx.PROJECT}.runs.{uuid}"
    assert seen["no_config"] is None
    assert Path(seen["home"]).name == uuid and seen["home_entries"] == []
    assert not Path(seen["home"]).exists()  # removed after the run
    assert seen["outputs"] == str(polyaxon_stack.layout.context_root / "artifacts" / uuid / "outputs")
    assert seen["cwd"] == str(polyaxon_stack.workdir)
    assert seen["slack_token"] is None  # the agent's environment does not leak into jobs
    # ...but what the stack's environment sets for jobs does reach them (tests/conftest.py sets the threads).
    assert seen["omp_threads"] == os.environ["OMP_NUM_THREADS"]
    assert seen["hf_home"] == str(polyaxon_stack.layout.hf_home)  # one Hugging Face cache per stack


def test_model_cache_connection_is_a_host_folder(
    probe: tuple[str, dict[str, Any]], polyaxon_stack: LocalPolyaxonStack
) -> None:
    _, seen = probe
    assert seen["model_cache"] == str(polyaxon_stack.layout.model_cache)
    assert (polyaxon_stack.layout.model_cache / "probe.txt").read_text() == "cached"


def test_an_undeclared_connection_is_refused_by_the_server(gateway: PolyaxonGateway) -> None:
    operation = plx.python_operation("print('never')", name="noconn")
    operation["component"]["run"]["connections"] = ["no-such-connection"]
    run = gateway.submit(operation, name=plx.unique_name("noconn"))
    done = plx.wait_for_status(gateway, run.uuid, {"failed"}, timeout_s=30)
    messages = " ".join(c.message or "" for c in gateway.get_run(done.uuid).conditions)
    assert "no-such-connection" in messages
