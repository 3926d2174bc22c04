"""Runs and projects Polyaxon no longer has, against the live local server: the gateway's 404 translation.

Polyaxon's delete (its UI's, or the client's) starts a deletion: the run leaves every list and its statuses and
lineage answer 404, yet `get_run` still returns it, and its logs, artifacts, stop and copy answer as if nothing
happened. A replaced server answers 404 for everything of the project.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.polyaxon import (
    GatewayError,
    PolyaxonGateway,
    ProjectMissingError,
    RunGoneError,
    RunNotFoundError,
)
from tests.fixtures import polyaxon as plx

pytestmark = pytest.mark.polyaxon

polyaxon_stack = plx.polyaxon_stack


@pytest.fixture(scope="module")
def gw(polyaxon_stack: LocalPolyaxonStack) -> Iterator[PolyaxonGateway]:
    """A gateway on a project of its own (a test deletes it)."""
    gateway = PolyaxonGateway(host=polyaxon_stack.host, token=None, project=f"gone-{uuid.uuid4().hex[:8]}")
    gateway.ensure_project()
    yield gateway
    gateway.close()


@pytest.fixture(scope="module")
def deleted_run(gw: PolyaxonGateway) -> str:
    """A run that succeeded, then was deleted in Polyaxon: its uuid."""
    info = gw.submit(plx.python_operation("print('hello')"), name=plx.unique_name("deleted"))
    plx.wait_for_status(gw, info.uuid, {"succeeded"}, timeout_s=120)
    gw._client.runs_v1.delete_run(gw.owner, gw.project, info.uuid)
    return info.uuid


def _calls(gw: PolyaxonGateway) -> dict[str, Callable[[str], Any]]:
    return {
        "get_run": lambda u: gw.get_run(u),
        "run_conditions": gw.run_conditions,
        "tail_logs": gw.tail_logs,
        "lineage": gw.lineage,
        "artifact_tree": gw.artifact_tree,
        "stop": gw.stop,
        "copy_run": lambda u: gw.copy_run(u, name=plx.unique_name("copy")),
    }


CALLS = ["get_run", "run_conditions", "tail_logs", "lineage", "artifact_tree", "stop", "copy_run"]


@pytest.mark.parametrize("call", CALLS)
def test_a_run_deleted_in_polyaxon_is_gone_for_every_read_and_write(
    gw: PolyaxonGateway, deleted_run: str, call: str
) -> None:
    with pytest.raises(RunGoneError) as raised:
        _calls(gw)[call](deleted_run)
    assert raised.value.uuid == deleted_run and raised.value.host == gw.host
    assert "deleted there, or the server was replaced" in str(raised.value)
    # Nothing was created from it: a copy of a run being deleted would be a run built on nothing.
    assert all(not run.name.startswith("copy-") for run in gw.list_runs())


@pytest.mark.parametrize("call", ["get_run", "run_conditions", "lineage", "tail_logs"])
def test_a_uuid_polyaxon_never_had_is_gone_too(gw: PolyaxonGateway, call: str) -> None:
    unknown = uuid.uuid4().hex
    with pytest.raises(RunGoneError) as raised:
        _calls(gw)[call](unknown)
    assert raised.value.uuid == unknown


def test_a_404_that_is_not_about_a_run_stays_not_found(gw: PolyaxonGateway) -> None:
    with pytest.raises(RunNotFoundError) as raised:
        gw.get_model_version("no-such-version")
    assert not isinstance(raised.value, RunGoneError)


def test_a_missing_project_is_said_so_and_a_submission_creates_it_again(gw: PolyaxonGateway) -> None:
    gw._client.projects_v1.delete_project(gw.owner, gw.project)
    with pytest.raises(ProjectMissingError, match=f"no project {gw.owner}/{gw.project}"):
        gw.list_active_runs()
    with pytest.raises(ProjectMissingError):
        gw.last_change()
    # A run of the vanished project is gone, whatever its own state was.
    with pytest.raises(RunGoneError):
        gw.get_run(uuid.uuid4().hex)
    name = plx.unique_name("after")
    info = gw.submit(plx.python_operation("print('again')"), name=name)
    assert plx.wait_for_status(gw, info.uuid, {"succeeded"}, timeout_s=120).name == name
    assert [run.name for run in gw.list_runs()] == [name]


def test_an_unreachable_server_is_not_mistaken_for_a_gone_run() -> None:
    down = PolyaxonGateway(host=plx.free_closed_port_host(), token=None, timeout_s=2.0)
    with pytest.raises(GatewayError) as raised:
        down.get_run(uuid.uuid4().hex)
    assert not isinstance(raised.value, RunNotFoundError)
