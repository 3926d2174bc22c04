"""A run's artifacts store: walk its files, read one, hash one without holding it in memory.

Paths are POSIX and relative to the run's artifacts root (`outputs/...`, `plxlogs/...`), as the streams
API takes them. Three quirks of that API shape this module:

- the tree endpoint lists ONE level per call (`files` as {name: size}, `dirs` as names) and answers
  every failure with HTTP 200 and an `error` field (`tree.model_extra["error"]`); a missing path reads
  `Could not list path <uuid>. Error [Errno 2] No such file or directory: '<store>/<uuid>/<path>'`;
- listing a file answers a one-entry listing of that file: the same answer as for a folder holding one
  file of the same name, so only the parent's listing tells the two apart;
- the file endpoint copies the file into the server's archive cache before it answers, and without
  `force=True` serves that cached copy on later calls: a file a live run rewrote would read stale.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
from collections.abc import Generator
from typing import Any

from bot.polyaxon.base import GatewayBase
from bot.polyaxon.types import ArtifactFile, ArtifactNotFoundError, GatewayError

_CHUNK_BYTES = 1 << 20
# What a listing error says when the path is not there (or runs through a file); anything else is a failure.
_MISSING_MARKERS = ("[Errno 2]", "No such file or directory", "[Errno 20]", "Not a directory")

_Listing = tuple[dict[str, int], list[str]]


class ArtifactsApi(GatewayBase):
    """Files in a run's artifacts store."""

    def artifact_tree(self, run_uuid: str, path: str = "", *, max_entries: int = 10_000) -> list[ArtifactFile]:
        """Every file under `path` (a folder, or one file), sorted by path; [] when `path` does not exist.

        One request for the run, then one per folder, as the API lists one level at a time. The walk stops with a
        GatewayError once it has seen more than `max_entries` files and folders, so a runaway tree
        (or a symlink loop in the store) cannot keep the bot listing.
        """
        root = _clean(path)
        # The run is read first (RunGoneError when Polyaxon no longer has it): the store still serves the files of a
        # run being deleted, as if nothing happened.
        namespace = self._namespace(run_uuid, fresh=True)
        listing = self._listing(namespace, run_uuid, root)
        if listing is None:
            return []
        files, dirs = listing
        name = posixpath.basename(root)
        if root and not dirs and list(files) == [name]:
            parent = self._listing(namespace, run_uuid, posixpath.dirname(root))
            if parent is not None and name in parent[0]:
                return [ArtifactFile(path=root, size=files[name])]
        found: list[ArtifactFile] = []
        pending: list[str] = []
        seen = 0
        folder = root
        while True:
            if listing is not None:  # None: the folder went away during the walk
                files, dirs = listing
                seen += len(files) + len(dirs)
                if seen > max_entries:
                    raise GatewayError(
                        f"Polyaxon at {self.host}: the artifacts of run {run_uuid} under {root or '/'} hold more "
                        f"than {max_entries} files and folders; stopped walking (list a narrower path)"
                    )
                found.extend(ArtifactFile(path=_join(folder, n), size=size) for n, size in files.items())
                pending.extend(_join(folder, d) for d in dirs)
            if not pending:
                break
            folder = pending.pop()
            listing = self._listing(namespace, run_uuid, folder)
        return sorted(found, key=lambda f: f.path)

    def read_artifact(self, run_uuid: str, path: str, *, max_bytes: int) -> bytes:
        """The bytes of one file, read fresh from the store; refused when it is larger than `max_bytes`.

        The size is checked on the folder's listing first, because the server copies the whole file
        before it answers: a refused read must not ask for it. The stream is capped too, in case a live
        run grew the file since. A missing file raises ArtifactNotFoundError.
        """
        clean = _file_path(path)
        namespace = self._namespace(run_uuid)
        size = self._file_size(namespace, run_uuid, clean)
        too_large = (
            f"Polyaxon at {self.host}: {clean} of run {run_uuid} is larger than the {max_bytes} bytes "
            f"the bot reads at once"
        )
        if size > max_bytes:
            raise GatewayError(f"{too_large} ({size} bytes)")
        content = bytearray()
        with contextlib.closing(self._chunks(namespace, run_uuid, clean)) as chunks:
            for chunk in chunks:
                content += chunk
                if len(content) > max_bytes:
                    raise GatewayError(f"{too_large} (it grew while being read)")
        return bytes(content)

    def hash_artifact(self, run_uuid: str, path: str) -> tuple[str, int]:
        """The sha256 (hex) and byte count of one file, streamed in chunks: never whole in memory.

        A missing file raises ArtifactNotFoundError, a folder a GatewayError.
        """
        clean = _file_path(path)
        namespace = self._namespace(run_uuid)
        self._file_size(namespace, run_uuid, clean)  # a clear error for a missing file or a folder
        digest = hashlib.sha256()
        count = 0
        with contextlib.closing(self._chunks(namespace, run_uuid, clean)) as chunks:
            for chunk in chunks:
                digest.update(chunk)
                count += len(chunk)
        return digest.hexdigest(), count

    # Plumbing -------------------------------------------------------------------------------

    def _listing(self, namespace: str, run_uuid: str, path: str) -> _Listing | None:
        """One level of the tree at `path`; None when it does not exist."""
        tree = self._read(
            f"list the artifacts of run {run_uuid} at {path or '/'}",
            lambda: self._client.runs_v1.get_run_artifacts_tree(
                namespace, self.owner, self.project, run_uuid, path=path
            ),
            run=run_uuid,
        )
        error = (tree.model_extra or {}).get("error")
        if error:
            if any(marker in str(error) for marker in _MISSING_MARKERS):
                return None
            raise GatewayError(
                f"Polyaxon at {self.host} could not list the artifacts of run {run_uuid} at {path or '/'}: "
                f"{str(error)[:500]}"
            )
        return dict(tree.files or {}), list(tree.dirs or [])

    def _file_size(self, namespace: str, run_uuid: str, path: str) -> int:
        """The listed size of the file at `path`, from its folder's listing."""
        parent = self._listing(namespace, run_uuid, posixpath.dirname(path))
        name = posixpath.basename(path)
        if parent is not None and name in parent[0]:
            return parent[0][name]
        if parent is not None and name in parent[1]:
            raise GatewayError(f"Polyaxon at {self.host}: {path} of run {run_uuid} is a folder, not a file")
        raise ArtifactNotFoundError(f"Polyaxon at {self.host}: run {run_uuid} has no artifact {path}")

    def _chunks(self, namespace: str, run_uuid: str, path: str) -> Generator[bytes, None, None]:
        """The file's bytes as they stream in; close the generator to drop the connection early."""
        what = f"read artifact {path} of run {run_uuid}"

        def fetch() -> Any:
            try:
                # force=True: without it the server answers from its cache, stale once the file changed.
                return self._client.runs_v1.get_run_artifact(
                    namespace,
                    self.owner,
                    self.project,
                    run_uuid,
                    path=path,
                    stream=True,
                    force=True,
                    _preload_content=False,
                )
            except self._api_errors as exc:
                if getattr(exc, "status", None) == 404:
                    raise ArtifactNotFoundError(
                        f"Polyaxon at {self.host}: run {run_uuid} has no artifact {path}"
                    ) from exc
                raise

        response = self._read(what, fetch)
        complete = False
        try:
            expected = response.headers.get("content-length")
            received = 0
            for chunk in response.stream(_CHUNK_BYTES):
                received += len(chunk)
                yield chunk
            if expected is not None and received != int(expected):
                raise GatewayError(
                    f"Polyaxon at {self.host} sent {received} of the {expected} bytes of {path} of run {run_uuid}"
                )
            complete = True
        except GatewayError:
            raise
        except Exception as exc:
            raise self._fail(what, exc) from exc
        finally:
            if not complete:
                response.close()  # a half-read connection must not go back to the pool
            response.release_conn()


def _clean(path: str) -> str:
    """`path` as the store names it (POSIX, relative, no `.` or `..` steps); refuses one leaving the run."""
    stripped = path.strip("/")
    cleaned = posixpath.normpath(stripped) if stripped else ""
    if cleaned == ".":
        return ""
    if cleaned == ".." or cleaned.startswith("../"):
        raise GatewayError(f"Artifact path {path!r} points outside the run's artifacts")
    return cleaned


def _file_path(path: str) -> str:
    clean = _clean(path)
    if not clean:
        raise GatewayError("An artifact read needs a file path, not the run's artifacts root")
    return clean


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name
