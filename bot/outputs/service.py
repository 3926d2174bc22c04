"""`/finetune outputs RUN`: read a run's outputs back from Polyaxon, check them, report them in its thread.

Reading back is the check the guidance asks for before scaling: each checkpoint and the final model folder
are listed, their files hashed in the store (within a byte budget, the final model and eval results first)
and compared with the digests the trainer recorded; the eval results are parsed and their contract hash
compared with the run's. A succeeded run whose outputs check out is marked confirmed (`runs.outputs_confirmed_at`)
and its card says so; the sweep gate asks for such a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from bot.outputs.harness import harness_problems
from bot.outputs.inventory import (
    MANIFEST,
    EvalCheck,
    FileEntry,
    FolderCheck,
    OutputsReport,
    checkpoint_step_of,
    folder_digest,
    group_folders,
    listed,
    manifest_changes,
    metadata_missing,
)
from bot.outputs.render import render_outputs
from bot.redact import redact
from bot.runs.admit import find_run_for
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.evals import task_hashes
from bot.runs.kinds import Verb
from bot.runs.thread import RunThread
from bot.slack.blocks import escape
from storage import repos
from storage.models import Run

log = logging.getLogger(__name__)

# Bytes the bot hashes through the artifacts API per `outputs` call; folders past it are checked by size
# against the trainer's manifest (and said so). Large full fine-tunes hold tens of GB of checkpoints.
HASH_BUDGET_BYTES = 4 * 1024**3
SMALL_FILE_BYTES = 4 * 1024**2


class OutputsService:
    """Reads back, checks and reports a run's outputs; marks the run confirmed when they check out."""

    def __init__(self, deps: RunDeps, thread: RunThread, *, hash_budget_bytes: int = HASH_BUDGET_BYTES) -> None:
        self.deps = deps
        self.thread = thread
        self.hash_budget_bytes = hash_budget_bytes

    def outputs(self, ref: str, *, user: str) -> Reply:
        """Check the run's outputs, post the report (and the eval results file) in its thread, update its card."""
        from bot.polyaxon import GatewayError, PolyaxonUnreachableError

        run = find_run_for(self.deps.sessions, ref, Verb.OUTPUTS)
        if not run.polyaxon_uuid:
            raise RunError(
                f"`{escape(run.name)}` has not reached Polyaxon yet ({escape(run.status)}): nothing to read back"
            )
        try:
            report, eval_bytes = self.inspect(run)
        except PolyaxonUnreachableError:
            raise  # told as the outage it is, by the command's one answer to an outage
        except GatewayError as exc:
            why = (
                f"could not read the outputs of `{escape(run.name)}` from Polyaxon: "
                f"{escape(redact(str(exc), extra_secrets=self.deps.secrets))}. Try again shortly."
            )
            raise RunError(why) from exc
        text, blocks = render_outputs(report, run, self.commands(run, report), self.thread.polyaxon_url(run))
        with self.deps.sessions() as s:
            fresh = self.thread.reload(s, run)
            confirmed_at = self.deps.clock() if report.confirmed else None
            run = repos.update_run(s, fresh, outputs_check=report.summary(), outputs_confirmed_at=confirmed_at)
            repos.add_audit(
                s,
                user=user,
                channel=run.channel,
                command="outputs",
                outcome="ok",
                detail="confirmed" if report.confirmed else "; ".join(report.problems[:3]) or "not confirmed",
                run_id=run.id,
            )
        self.thread.post_thread(run, text, blocks=blocks, purpose="outputs")
        if eval_bytes is not None:
            self.thread.upload_to_thread(
                run,
                content=eval_bytes,
                filename=f"{run.name}-eval_results.json",
                title=f"{run.name}: eval results",
                comment="The eval results as the run stored them",
            )
        self.thread.update_card(run, force=True)
        verdict = "confirmed :white_check_mark:" if report.confirmed else "*not confirmed*"
        return Reply(text=f"Outputs of `{escape(run.name)}` read back: {verdict}. The report is in the run's thread.")

    # --- reading back ----------------------------------------------------------------------------

    def inspect(self, run: Run) -> tuple[OutputsReport, bytes | None]:
        """List, hash and judge the run's outputs; the eval results' bytes when there are any."""
        gateway = self.deps.gateway
        uuid = run.polyaxon_uuid or ""
        info = gateway.get_run(uuid, with_conditions=False)
        recorded = info.outputs
        files = gateway.artifact_tree(uuid, "outputs")
        logs = gateway.artifact_tree(uuid, "plxlogs")
        folders = group_folders((f.path, f.size) for f in files)
        # The final model first, then the newest checkpoints, while the hash budget lasts.
        order = sorted(folders, key=lambda n: (n != "model", -(checkpoint_step_of(n) or 0)))
        budget = self.hash_budget_bytes
        checks: dict[str, FolderCheck] = {}
        for name in order:
            check = self._folder(
                uuid, name, folders[name], recorded, hash_it=sum(s for _, s in folders[name]) <= budget
            )
            budget -= check.size if check.hashed else 0
            checks[name] = check
        model = checks.pop("model", None)
        eval_check, eval_bytes = self._eval(uuid, run, recorded, {f.path: f.size for f in files})
        report = OutputsReport(
            run_name=run.name,
            status=info.status,
            checkpoints=sorted(checks.values(), key=lambda c: c.step or 0),
            model=model,
            eval=eval_check,
            log_bytes=sum(f.size for f in logs),
            needs_model=run.kind != "eval",
        )
        return report, eval_bytes

    def _folder(
        self, uuid: str, name: str, files: list[tuple[str, int]], recorded: dict[str, Any], *, hash_it: bool
    ) -> FolderCheck:
        """One folder as found in the store: complete or not, its files hashed (when `hash_it`) and compared."""
        gateway = self.deps.gateway
        path = f"outputs/{name}"
        sizes = dict(files)
        check = FolderCheck(
            name=name,
            path=path,
            step=checkpoint_step_of(name),
            size=sum(sizes.values()),
            files=len([p for p in sizes if listed(p)]),
        )
        if name == "model":
            check.recorded_digest = recorded.get("model_digest")
        else:
            check.recorded_digest = (recorded.get("checkpoint_digests") or {}).get(name)
        manifest = None
        if MANIFEST in sizes:
            try:
                manifest = json.loads(gateway.read_artifact(uuid, f"{path}/{MANIFEST}", max_bytes=SMALL_FILE_BYTES))
                check.manifest_digest = str(manifest.get("digest")) if manifest.get("digest") else None
            except (ValueError, AttributeError):
                check.missing.append(f"a readable {MANIFEST}")
        fmt = str(manifest.get("format")) if isinstance(manifest, dict) and manifest.get("format") else None
        check.missing[:0] = metadata_missing(set(sizes), checkpoint=name != "model", fmt=fmt)
        content = {p: s for p, s in sizes.items() if listed(p)}
        entries: dict[str, FileEntry] = {}
        if hash_it:
            for rel in sorted(content):
                sha, got = gateway.hash_artifact(uuid, f"{path}/{rel}")
                entries[rel] = FileEntry(path=rel, size=got, sha256=sha)
            check.hashed = True
            check.store_digest = folder_digest(entries.values())
        else:
            entries = {rel: FileEntry(path=rel, size=size, sha256="") for rel, size in content.items()}
        check.changed_files = manifest_changes(manifest, entries)
        return check

    def _eval(
        self, uuid: str, run: Run, recorded: dict[str, Any], sizes: dict[str, int]
    ) -> tuple[EvalCheck, bytes | None]:
        path = "outputs/eval_results.json"
        check = EvalCheck(
            present=path in sizes,
            expected_contract_hash=run.eval_contract_hash or None,
            recorded_digest=recorded.get("eval_results_digest"),
            size=sizes.get(path, 0),
        )
        if not check.present:
            return check, None
        data = self.deps.gateway.read_artifact(uuid, path, max_bytes=SMALL_FILE_BYTES)
        check.store_digest = "sha256:" + hashlib.sha256(data).hexdigest()
        try:
            document = json.loads(data)
            check.contract_hash = document.get("contract_hash")
            check.metrics = {
                k: float(v) for k, v in (document.get("metrics") or {}).items() if isinstance(v, int | float)
            }
            check.harness_problems = harness_problems(document, run.eval_contract or {})
            check.task_hashes = task_hashes(document)
        except (ValueError, AttributeError):
            check.contract_hash = None
        return check, data

    # --- how to fetch each -------------------------------------------------------------------------

    def commands(self, run: Run, report: OutputsReport) -> dict[str, str]:
        """The `polyaxon ops` command line that fetches each part (Polyaxon 2.18 has no `ops download`)."""
        project = f"{self.deps.settings.polyaxon.owner}/{self.deps.settings.polyaxon.project}"
        base = f"polyaxon ops artifacts -p {project} -uid {run.polyaxon_uuid}"
        commands = {c.name: f"{base} -d {c.path} --path ./{run.name}" for c in report.checkpoints}
        if report.model is not None:
            commands["model"] = f"{base} -d outputs/model --path ./{run.name}"
        if report.eval.present:
            commands["eval_results"] = f"{base} -f outputs/eval_results.json --path ./{run.name}"
        commands["logs"] = f"polyaxon ops logs -p {project} -uid {run.polyaxon_uuid}"
        return commands
