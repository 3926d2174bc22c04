"""Every shipped recipe's main container tells Kubernetes why it ended: Polyaxon's own Kubernetes converter keeps
`terminationMessagePolicy: FallbackToLogsOnError` on the main container (each replica's, for a PyTorchJob), so a
container killed for memory leaves its log's last lines where the operator reads them for the failed Job."""

from __future__ import annotations

from typing import Any

import pytest

from bot.catalog import Catalog
from bot.polyaxon.spec import to_pod_spec
from tests.bot.catalog.planning import plan


def _main_containers(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """`polyaxon-main` of a converted job, or each replica's `pytorch` (the name the training operator requires)."""
    if "batchJobSpec" in resource:
        pods = [resource["batchJobSpec"]["template"]["spec"]]
    else:
        replicas = resource["pytorchJobSpec"]["replicaSpecs"] if "pytorchJobSpec" in resource else {}
        pods = [replica["template"]["spec"] for replica in replicas.values()]
    return [c for pod in pods for c in pod["containers"] if c["name"] in {"polyaxon-main", "pytorch"}]


def test_every_recipe_s_containers_fall_back_to_their_log(catalog: Catalog) -> None:
    seen: dict[str, int] = {}
    for name in sorted(catalog.recipes):
        result = plan(catalog, f"run recipe={name} --dry-run", require_local=False)
        resource = to_pod_spec(result.operation)
        mains = _main_containers(resource)
        assert mains, (name, sorted(resource))
        for container in mains:
            assert container.get("terminationMessagePolicy") == "FallbackToLogsOnError", (name, container)
        seen[resource.get("kind", "?")] = seen.get(resource.get("kind", "?"), 0) + 1
    assert len(seen) >= 1 and sum(seen.values()) == len(catalog.recipes), seen


@pytest.mark.parametrize("policy", [None, "FallbackToLogsOnError"])
def test_the_local_agent_reads_the_policy_and_deadline_of_the_compiled_operation(policy: str | None) -> None:
    from polyaxon._polyaxonfile import OperationSpecification

    from bot.local.polyaxon.steps.termination import pod_spec
    from tests.fixtures.polyaxon import python_operation

    operation = OperationSpecification.read(python_operation("print(1)", message_policy=policy, timeout_s=90))
    # What haupt stores as the run's content and hands the agent: the compiled operation.
    content = OperationSpecification.compile_operation(operation).to_json()
    spec = pod_spec(content)
    assert spec.deadline_s == 90.0
    assert spec.message_policy == (policy or "File")
