"""The local process agent: Polyaxon's own sync agent loop with the local process executor.

Run as `python -m bot.local.polyaxon.agent` by the supervisor, with `FINETUNE_LOCAL_AGENT_SETTINGS`
(JSON) and Polyaxon's variables (`POLYAXON_CONTEXT_ROOT`, `POLYAXON_AGENT_*`) in its environment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from bot.local.polyaxon.config import AGENT_SETTINGS_ENV, AgentSettings

_log = logging.getLogger("bot.local.polyaxon.agent")
T = TypeVar("T")

# Sandbox writes fail with a spurious 405 on 1-5 % of overlapping calls, and with 5xx while
# SQLite is busy: retry them (status updates and summaries are idempotent).
_RETRY_STATUSES = {405, 409, 429, 500, 502, 503, 504}


def retry_write(call: Callable[[], T], *, attempts: int = 5, what: str = "write") -> T:
    """Run a Polyaxon write, retrying the sandbox's spurious failures with a short backoff."""
    from polyaxon.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    for attempt in range(1, attempts + 1):
        try:
            return call()
        except ApiException as exc:
            if exc.status not in _RETRY_STATUSES or attempt == attempts:
                raise
            _log.info("%s answered %s, retrying (%d/%d)", what, exc.status, attempt, attempts)
        except HTTPError:
            if attempt == attempts:
                raise
            _log.info("%s: connection error, retrying (%d/%d)", what, attempt, attempts)
        time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def build_agent(settings: AgentSettings) -> Any:
    """Configure Polyaxon's settings explicitly and return a ready `LocalAgent`."""
    from polyaxon import settings as plx_settings
    from polyaxon._runner.agent.client import AgentClient
    from polyaxon._runner.agent.sync_agent import BaseSyncAgent
    from polyaxon._schemas.client import ClientConfig
    from polyaxon.client import PolyaxonClient, RunClient

    from bot.local.polyaxon.executor import LocalProcessExecutor, RunNotFoundError
    from bot.local.polyaxon.steps.termination import pod_spec

    # POLYAXON_NO_CONFIG=true leaves CLIENT_CONFIG pointing at localhost:8000: set it from our
    # settings; AGENT_CONFIG comes from POLYAXON_AGENT_ARTIFACTS_STORE / _CONNECTIONS.
    plx_settings.CLIENT_CONFIG = ClientConfig(host=settings.host, use_https=False, timeout=10)
    plx_settings.set_agent_config()
    client = PolyaxonClient(config=plx_settings.CLIENT_CONFIG)

    class RetryingAgentClient(AgentClient):
        def log_run_status(self, *args: Any, **kwargs: Any) -> Any:
            return retry_write(lambda: AgentClient.log_run_status(self, *args, **kwargs), what="status")

    def report(owner: str, project: str, uuid: str, status: str, reason: str, message: str | None) -> None:
        agent_client.log_run_status(
            run_owner=owner, run_project=project, run_uuid=uuid, status=status, reason=reason, message=message
        )

    def sync_summaries(owner: str, project: str, uuid: str, run_path: Path, last_check: datetime | None) -> None:
        """What RunClient.sync_events_summaries does, but with blocking, retried writes.

        Polyaxon's version posts lineage and outputs with `async_req=True`, so a spurious 405
        is lost silently; this is the backstop that makes metrics and lineage visible.
        """
        from clipped.utils.paths import get_dirs_under_path

        run_client = RunClient(owner=owner, project=project, run_uuid=uuid, client=client)
        summaries: list[Any] = []
        last_values: dict[str, Any] = {}
        for folder, is_system in ((run_path / "events", False), (run_path / "resources", True)):
            if not folder.is_dir():
                continue
            for kind in get_dirs_under_path(str(folder)):
                found, values = run_client._collect_events_summaries(
                    events_path=str(folder), events_kind=kind, last_check=last_check, is_system_resource=is_system
                )
                summaries += found
                if not is_system:
                    last_values.update(values)
        if summaries:
            retry_write(lambda: run_client.log_artifact_lineage(summaries, async_req=False), what="lineage")
        if last_values:
            retry_write(lambda: run_client.log_outputs(async_req=False, **last_values), what="outputs")

    agent_client = RetryingAgentClient(owner=settings.owner, client=client)

    class BoundExecutor(LocalProcessExecutor):
        # BaseAgent builds `EXECUTOR()` without arguments.
        def __init__(self) -> None:
            super().__init__(settings, report=report, sync_summaries=sync_summaries)

    class LocalAgent(BaseSyncAgent):
        """Polyaxon's sync agent loop, executing runs as local processes."""

        EXECUTOR = BoundExecutor

        def __init__(self) -> None:
            super().__init__(owner=settings.owner, max_interval=settings.max_interval)
            # BaseAgent builds its client from global settings: use the retrying explicit one.
            self.client = agent_client
            assert isinstance(self.executor, LocalProcessExecutor)
            self.local: LocalProcessExecutor = self.executor

        def cron(self) -> None:
            # Polyaxon's loop calls the server's cron before every state read (every <= 3 s here). The sandbox
            # server already runs that cron itself every 2 s (haupt's `agent_cron` thread: heartbeats, stats,
            # deletions), so the agent's call only did the same work again: ~1.4 % of a core of server CPU per
            # idle stack, measured with /proc on an idle stack for 60 s (4.3 % with it, 2.9 % without). Deleted
            # runs are still confirmed: the state read the agent makes next confirms them too.
            return None

        def submit_run(self, run_data: Any) -> None:
            owner, project, uuid = _run_info(run_data[0])
            resource = self.prepare_run_resource(
                owner_name=owner, project_name=project, run_name=run_data[2], run_uuid=uuid, content=run_data[3]
            )
            if not resource:
                return  # prepare_run_resource already logged the run as failed
            try:
                # What Kubernetes would hold of the pod (the Job's deadline, the termination message policy).
                pod = pod_spec(run_data[3])
                self.local.create(
                    run_uuid=uuid, run_kind=run_data[1], resource=resource, owner=owner, project=project, pod=pod
                )
            except Exception as exc:
                self.client.log_run_failed(run_owner=owner, run_project=project, run_uuid=uuid, exc=exc)

        def stop_run(self, run_data: Any) -> None:
            owner, project, uuid = _run_info(run_data[0])
            try:
                self.local.stop(run_uuid=uuid, run_kind=run_data[1])
            except RunNotFoundError:
                # Not started yet (or lost in an agent restart): nothing to kill. Polyaxon's agent says so when the
                # operation it is asked to stop is not on the cluster (a 404).
                self.client.log_run_stopped(run_owner=owner, run_project=project, run_uuid=uuid)

        def check_run(self, run_data: Any) -> None:
            owner, project, uuid = _run_info(run_data[0])
            try:
                self.local.get(run_uuid=uuid, run_kind=run_data[1])
            except RunNotFoundError:
                # Polyaxon's agent, for a run the server thinks is on the cluster and the cluster does not have.
                self.client.log_run_stopped(run_owner=owner, run_project=project, run_uuid=uuid)

    return LocalAgent()


def _run_info(run_instance: str) -> tuple[str, str, str]:
    from polyaxon._env_vars.getters import get_run_info

    owner, project, uuid = get_run_info(run_instance=run_instance)
    return str(owner), str(project), str(uuid)


def fail_stale_jobs(settings: AgentSettings, report: Callable[[str, str, str, str], None]) -> list[str]:
    """Kill job groups left by a previous agent process and mark their runs failed."""
    from bot.local.polyaxon.procs import kill_recorded_group

    stale: list[str] = []
    jobs = settings.layout.jobs
    if not jobs.is_dir():
        return stale
    for record_path in sorted(jobs.glob("*.json")):
        uuid = record_path.stem
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            record_path.unlink(missing_ok=True)
            continue
        kill_recorded_group(int(record["pgid"]), record.get("start_ticks"), signal.SIGKILL)
        try:
            report(record["owner"], record["project"], uuid, "The local agent restarted; the run's process was lost.")
        except Exception as exc:  # the server may still be down: keep the record for the next start
            _log.warning("could not mark stale run %s failed: %r", uuid, exc)
            continue
        record_path.unlink(missing_ok=True)
        stale.append(uuid)
    return stale


def run_agent(settings: AgentSettings) -> int:
    """Run the agent loop until SIGTERM/SIGINT; stop every live run before returning."""
    from bot.local.polyaxon.steps.status import LOST

    agent = build_agent(settings)

    def report_stale(owner: str, project: str, uuid: str, message: str) -> None:
        # The job's process died with the agent: on a cluster, a pod whose node went away (the operator relays the
        # container kubelet could not find). The agent's own words go to its log.
        _log.warning("run %s: %s", uuid, message)
        agent.client.log_run_status(
            run_owner=owner,
            run_project=project,
            run_uuid=uuid,
            status=LOST.status,
            reason=LOST.reason,
            message=LOST.message,
        )

    fail_stale_jobs(settings, report_stale)

    exiting = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        exiting.set()
        # BaseSyncAgent.start() only listens to SIGINT (its exit event): route SIGTERM there.
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not on_sigterm:
            handler(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)
    backoff = 1.0
    try:
        with agent:
            while not exiting.is_set():
                try:
                    agent.start()
                except Exception:
                    # Polyaxon's loop raises (TypeError on a `None` live_state, a spurious 405)
                    # when the server goes away or blips: restart the loop in this process so the
                    # runs it supervises live on. The supervisor restarts the process if it dies.
                    _log.exception("agent loop crashed; restarting it in %.0f s", backoff)
                    exiting.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
                else:
                    backoff = 1.0
    except KeyboardInterrupt:
        pass
    finally:
        agent.local.shutdown()
    return 0


def main() -> int:
    """Entry point of the agent process."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s agent %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # Polyaxon's loop logs two INFO lines per poll (every second): keep its warnings only.
    logging.getLogger("polyaxon.cli").setLevel(logging.WARNING)
    raw = os.environ.get(AGENT_SETTINGS_ENV)
    if not raw:
        print(f"{AGENT_SETTINGS_ENV} is not set; the supervisor starts this process.", file=sys.stderr)
        return 2
    return run_agent(AgentSettings.from_json(raw))


if __name__ == "__main__":
    sys.exit(main())
