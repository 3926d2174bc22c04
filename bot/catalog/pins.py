"""The pins of a run and the pin gate's evidence: image, code, model, dataset, and the eval contract.

A remote ref is pinned by a commit sha (and a dataset by its content digest too); a local folder
or file is pinned by the sha256 of its content, computed here. What is not pinned is listed: the
plan refuses it, or labels the run non-comparable when the recipe allows exploration.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.catalog.digests import DATA_SUFFIXES, content_digest, eval_contract_hash
from bot.catalog.errors import PlanError
from bot.catalog.harness import Suite
from bot.catalog.manifests import Component, DatasetRef, Recipe

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*(?::[0-9]+)?/[a-z0-9._/\-]+@sha256:[0-9a-f]{64}$")

# Sets one component input and records where its value came from.
Put = Callable[[str, Any, str], None]


class Pinner:
    """Pins a recipe's refs and eval contract; local content digests are cached by file size and mtime."""

    def __init__(self, repo_root: Path, suites: dict[str, Suite] | None = None) -> None:
        self.repo_root = repo_root
        self.suites = suites or {}
        self._digests: dict[Any, str] = {}

    def _local(
        self, written: str, what: str, build: str | None, require: bool, needs: str | None = None
    ) -> tuple[Path | None, str]:
        """Resolve a recipe's local path; (None, reason) when it is missing and not required. The reason says how to
        build it, and what to install first when the recipe says (`needs`)."""
        path = Path(written)
        resolved = path if path.is_absolute() else self.repo_root / path
        if resolved.exists():
            return resolved, ""
        how = f": build it with `{build}`" if build else ""
        if build and needs:
            how = f": it needs `{needs}`, then build it with `{build}`"
        if require:
            raise PlanError(f"{what} {written} is missing{how}")
        return None, f"{what} {written} is not built{how} (digest computed at run time)"

    def pin(
        self, recipe: Recipe, component: Component, put: Put, warnings: list[str], require: bool
    ) -> tuple[dict[str, str], list[str]]:
        """Pin image, code, model and dataset, setting their inputs; return the pins and what is unpinned."""
        spec, source = recipe.spec, f"recipe {recipe.file}"
        pins: dict[str, str] = {"recipe": recipe.hash}
        unpinned: list[str] = []
        if spec.image is not None:
            pins["image"] = spec.image
            if not IMAGE_RE.match(spec.image):
                unpinned.append(f"image {spec.image} is a floating tag, not a digest (repo@sha256:...)")
            put("image", spec.image, source)
        elif "image" in component.inputs:
            unpinned.append("no image")
        if spec.code is not None:
            if spec.code.path is not None:
                path, missing = self._local(spec.code.path, "code", None, require)
                pins["code"] = content_digest(path, (".py",), self._digests) if path else "unbuilt"
                if missing:
                    warnings.append(missing)
                put("code_revision", pins["code"], f"computed: sha256 of {spec.code.path} (Python files)")
            else:
                pins["code"] = spec.code.revision or ""
                if not SHA_RE.match(pins["code"]):
                    unpinned.append(f"code revision {pins['code']!r} is not a commit sha")
                put("code_revision", pins["code"], source)
        else:
            unpinned.append("no code revision")
        model = spec.model
        if model is not None:
            if model.path is not None:
                path, missing = self._local(model.path, "model", model.build, require, model.needs)
                pins["model"] = (
                    f"{model.path}@{content_digest(path, None, self._digests)}" if path else f"{model.path}@unbuilt"
                )
                if missing:
                    warnings.append(missing)
                put("model_name_or_path", model.path, source)
            else:
                revision = model.revision or "main"
                pins["model"] = f"{model.id}@{revision}"
                if not SHA_RE.match(revision):
                    unpinned.append(f"model revision {revision!r} of {model.id} is a branch or tag, not a commit sha")
                put("model_name_or_path", model.id, source)
                put("model_revision", revision, source)
        if spec.dataset is not None:
            pins["dataset"] = self._pin_dataset(
                spec.dataset, "dataset", "dataset", put, source, unpinned, warnings, require
            )
            put("dataset_split", spec.dataset.split, source)
            if spec.dataset.text_field:
                put("dataset_text_field", spec.dataset.text_field, source)
        return pins, unpinned

    def _pin_dataset(
        self,
        ref: DatasetRef,
        prefix: str,
        what: str,
        put: Put,
        source: str,
        unpinned: list[str],
        warnings: list[str],
        require: bool,
    ) -> str:
        """Pin a dataset; return `name@revision+digest` and set the `{prefix}_*` inputs."""
        if ref.path is not None:
            path, missing = self._local(ref.path, what, ref.build, require)
            if path is None:
                warnings.append(missing)
                digest = "unbuilt"
            else:
                digest = content_digest(path, DATA_SUFFIXES, self._digests)
                if ref.digest and ref.digest != digest:
                    raise PlanError(f"{what} {ref.path} changed: its digest is {digest}, the recipe pins {ref.digest}")
            put(f"{prefix}_name", ref.path, source)
            if prefix == "dataset":
                put("dataset_digest", digest if digest != "unbuilt" else "", f"computed: sha256 of {ref.path}")
            return f"{ref.path}@{digest}"
        revision = ref.revision or "main"
        if not SHA_RE.match(revision):
            unpinned.append(f"{what} revision {revision!r} of {ref.id} is a branch or tag, not a commit sha")
        if not ref.digest or not DIGEST_RE.match(ref.digest):
            unpinned.append(f"{what} {ref.id} has no content digest (sha256:...)")
        put(f"{prefix}_name", ref.id, source)
        put(f"{prefix}_revision", revision, source)
        if prefix == "dataset":
            put("dataset_digest", ref.digest or "", source)
        return f"{ref.id}@{revision}+{ref.digest or 'no-digest'}"

    def eval_contract(self, recipe: Recipe, pins: dict[str, str], put: Put) -> tuple[dict[str, Any], str]:
        """The recipe's eval contract and its hash (empty without `eval:`); sets the `eval_*` inputs and its pin."""
        spec = recipe.spec.eval
        if spec is None:
            return {}, ""
        source = f"recipe {recipe.file}"
        if spec.suite is not None:
            return self.suite_contract(spec.suite, pins, put, f"{source} eval.suite")
        ref = spec.dataset or recipe.spec.dataset
        if ref is None:  # the pinned code generates its eval data (checked at load)
            name, revision = "generated by the recipe's code", pins.get("code", "unpinned")
        elif ref.path is not None:
            name = ref.path
            if spec.dataset is None and "dataset" in pins:
                revision = pins["dataset"].rsplit("@", 1)[1]  # the training data's digest
            else:
                path, _ = self._local(ref.path, "eval dataset", ref.build, False)
                revision = content_digest(path, DATA_SUFFIXES, self._digests) if path else "unbuilt"
        else:
            name, revision = ref.id or "", ref.revision or "main"
        fields = {
            "dataset": name,
            "revision": revision,
            "split": spec.split,
            "max_samples": spec.max_samples,
            "metrics": sorted(set(spec.metrics)),
            "procedure_version": spec.procedure_version,
            "seed": spec.seed,
        }
        digest = eval_contract_hash(fields)
        put("eval_dataset_name", name, source)
        put("eval_dataset_revision", revision, source)
        put("eval_split", spec.split, source)
        put("eval_max_samples", spec.max_samples, source)
        put("eval_metrics", ",".join(spec.metrics), source)
        put("eval_procedure_version", spec.procedure_version, source)
        put("eval_seed", spec.seed, source)
        put("eval_contract_hash", digest, "computed: eval contract")
        pins["eval_contract"] = digest
        return fields, digest

    def suite_contract(self, name: str, pins: dict[str, str], put: Put, source: str) -> tuple[dict[str, Any], str]:
        """A harness suite's contract (bot.catalog.harness): its fields, hash and inputs; each task digest checked
        again, so a task edited since the catalog loaded is refused rather than run under the old pin."""
        suite = self.suites.get(name)
        if suite is None:
            raise PlanError(f"the eval suite {name} is not in the catalog")
        for task in suite.tasks:
            folder = self.repo_root / suite.tasks_dir / task.name
            actual = content_digest(folder, None, self._digests) if folder.is_dir() else "missing"
            if actual != task.digest:
                raise PlanError(
                    f"eval task {task.name} changed since the catalog loaded ({task.digest} then, {actual} now): "
                    "reload the catalog (restart the bot) after reviewing the change"
                )
        fields = suite.contract()
        digest = eval_contract_hash(fields)
        for key, value in suite.inputs().items():
            put(key, value, f"{source}: {suite.file}")
        put("eval_dataset_name", "", f"{source}: the harness evaluates the final model, not a split during training")
        put("eval_contract_hash", digest, "computed: eval contract")
        pins["eval_contract"] = digest
        pins["eval_suite"] = f"{suite.name}@{digest}"
        return fields, digest
