"""What would be registered: a run's candidate as Polyaxon has it now, and the model's current version."""

from __future__ import annotations

import logging

from bot.registry.deps import RegistryDeps
from bot.registry.evidence import with_evaluations
from bot.registry.policy import Candidate, CurrentVersion
from storage import repos
from storage.models import Run

log = logging.getLogger(__name__)

# Lineage that describes the run, not the model: metrics, the environment, system resources (cpu, memory, load).
NOT_MODEL_ARTIFACTS = frozenset({"metric", "env", "system", "span"})


def read_candidate(deps: RegistryDeps, run: Run) -> tuple[Candidate, list[str]]:
    """The run's candidate as Polyaxon has it now, and the lineage names to register (GatewayError when down)."""
    uuid = run.polyaxon_uuid or ""
    info = deps.gateway.get_run(uuid, with_conditions=False)
    artifacts: list[str] = []
    names: list[str] = []
    checkpoint_path: str | None = None
    checkpoint_digest: str | None = None
    for artifact in deps.gateway.lineage(uuid):
        if artifact.kind in NOT_MODEL_ARTIFACTS or artifact.is_input:
            continue
        names.append(artifact.name)
        label = artifact.name
        if artifact.kind == "model":
            label = "checkpoint"
            checkpoint_path = artifact.path or artifact.summary.get("path")
            digest = artifact.summary.get("hash")
            checkpoint_digest = str(digest) if digest else None
        if label not in artifacts:
            artifacts.append(label)
    # The trainer's `eval_*` metrics, and a harness suite's (`TASK-METRIC`), named by the run's contract.
    contract_metrics = set((run.eval_contract or {}).get("metrics") or [])
    own = {
        key: float(value)
        for key, value in info.outputs.items()
        if (key.startswith("eval_") or key in contract_metrics)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    }
    eval_results, evidence = with_evaluations(deps, run, own)
    candidate = Candidate(
        run_uuid=uuid,
        run_name=run.name,
        checkpoint_path=checkpoint_path,
        checkpoint_digest=checkpoint_digest,
        artifacts=sorted(artifacts),
        eval_results=eval_results,
        evidence=evidence,
        eval_contract_hash=str(info.outputs.get("eval_contract_hash") or run.eval_contract_hash or ""),
        pins=dict(run.pins),
    )
    return candidate, sorted(set(names))


def fresh_digest(deps: RegistryDeps, run: Run) -> str | None:
    """The candidate's digest now; None when Polyaxon can't say (checked again before registering)."""
    from bot.polyaxon import GatewayError

    try:
        return read_candidate(deps, run)[0].digest()
    except GatewayError as exc:
        log.warning("registry: can't re-read the candidate of %s: %s", run.name, exc)
        return None


def current_version(deps: RegistryDeps, model: str) -> CurrentVersion | None:
    """The model's latest registered version, with the eval results it was approved on (from storage)."""
    with deps.runs.sessions() as s:
        registrations = list(repos.list_registrations(s, model=model))
        if not registrations:
            return None
        latest = registrations[-1]
        request = repos.get_approval_request(s, request_id=latest.request_id) if latest.request_id is not None else None
    snapshot = Candidate.model_validate(request.candidate) if request is not None and request.candidate else None
    return CurrentVersion(
        version=latest.version,
        eval_results=snapshot.eval_results if snapshot else {},
        eval_contract_hash=snapshot.eval_contract_hash if snapshot else "",
    )
