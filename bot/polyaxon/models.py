"""Polyaxon's project model registry: register, read and stage model versions."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from bot.polyaxon.base import GatewayBase, _utc
from bot.polyaxon.types import GatewayError, ModelVersion


class ModelsApi(GatewayBase):
    """Model versions in the project's registry."""

    def register_model_version(
        self,
        version: str,
        *,
        run_uuid: str,
        artifacts: Sequence[str] = (),
        description: str | None = None,
        tags: Sequence[str] = (),
        content: dict[str, Any] | None = None,
        force: bool = False,
    ) -> ModelVersion:
        """Register `version` in the project's model registry, bound to a run and its named artifacts."""
        from polyaxon.client import ProjectClient

        client = ProjectClient(owner=self.owner, project=self.project, client=self._client)

        def landed() -> Any:
            try:
                found = client.get_model_version(version)
            except Exception as exc:
                if getattr(exc, "status", None) == 404:
                    return None
                raise
            return found if found is not None and getattr(found, "run", None) == run_uuid else None

        raw = self._write(
            f"register model version {version}",
            lambda: client.register_model_version(
                version,
                description=description,
                tags=list(tags) or None,
                content=content,
                run=run_uuid,
                artifacts=list(artifacts) or None,
                force=force,
            ),
            landed=None if force else landed,
        )
        _model_version(raw, self.project)  # the write's answer has no artifacts (they are write-only there)
        registered = self.get_model_version(version)
        missing = set(artifacts) - set(registered.artifacts)
        if missing and not force:
            # A retried create can land as a version without all its lineage links (the first attempt created
            # the version, then failed): link them now by pushing the same version again, and read it back.
            return self.register_model_version(
                version,
                run_uuid=run_uuid,
                artifacts=artifacts,
                description=description,
                tags=tags,
                content=content,
                force=True,
            )
        if missing:
            raise GatewayError(
                f"Polyaxon at {self.host} registered {version} without the artifacts {', '.join(sorted(missing))}"
            )
        return registered

    def get_model_version(self, version: str) -> ModelVersion:
        """Read a model version back from the registry."""
        from polyaxon.client import ProjectClient

        client = ProjectClient(owner=self.owner, project=self.project, client=self._client)
        return _model_version(
            self._read(f"get model version {version}", lambda: client.get_model_version(version)), self.project
        )

    def stage_model_version(self, version: str, stage: str, *, reason: str, message: str | None = None) -> ModelVersion:
        """Move a model version to `stage` (testing, staging, production, disabled) with an audit reason."""
        from polyaxon.client import ProjectClient

        client = ProjectClient(owner=self.owner, project=self.project, client=self._client)
        self._write(
            f"move model version {version} to {stage}",
            lambda: client.stage_model_version(version, stage=stage, reason=reason, message=message) or True,
        )
        return self.get_model_version(version)


def _model_version(raw: Any, project: str) -> ModelVersion:
    if raw is None or not getattr(raw, "name", None):
        raise GatewayError("Polyaxon returned an empty model version")
    content = raw.content
    if isinstance(content, str):
        # The API stores content as a JSON string; give back what was registered.
        with contextlib.suppress(ValueError):
            content = json.loads(content)
    return ModelVersion(
        name=raw.name,
        project=project,
        run_uuid=getattr(raw, "run", None),
        stage=str(raw.stage) if getattr(raw, "stage", None) else None,
        description=raw.description,
        tags=list(raw.tags or []),
        artifacts=list(getattr(raw, "artifacts", None) or []),
        content=content,
        created_at=_utc(raw.created_at),
    )
