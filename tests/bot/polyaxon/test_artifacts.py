"""PolyaxonGateway's artifacts methods against the live local Polyaxon server (no mocks).

Files are put into a finished run's artifacts store by writing under `<store>/<run uuid>/`, which is
where the local stack's jobs write their outputs too.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from bot.polyaxon import GatewayError, PolyaxonGateway, RunNotFoundError
from bot.polyaxon.types import ArtifactFile, ArtifactNotFoundError
from tests.fixtures import polyaxon as plx

pytestmark = pytest.mark.polyaxon

polyaxon_stack = plx.polyaxon_stack
gateway = plx.gateway

BINARY = bytes(range(256)) * 40  # every byte value, 10240 bytes
# Larger than the gateway's 1 MiB chunks, and not a multiple of them.
LARGE = hashlib.sha256(b"seed").digest() * (8 * (1 << 20) // 32) + b"tail-bytes"

TREE = {
    "outputs/result.txt": b"trained",
    "outputs/empty.txt": b"",
    "outputs/data/binary.bin": BINARY,
    "outputs/data/deep/er/leaf.json": b'{"a": 1}',
    "outputs/data/deep/er/second leaf.txt": b"a name with a space",
    "outputs/twin/twin": b"a folder holding one file of its own name",
    "outputs/large.bin": LARGE,
}


@pytest.fixture(scope="module")
def run(gateway: PolyaxonGateway, polyaxon_stack: LocalPolyaxonStack) -> tuple[str, Path]:
    """A finished run with TREE written into its artifacts store: (uuid, the run's store folder)."""
    submitted = gateway.submit(
        plx.python_operation("print('artifacts', flush=True)", name="artifacts"), name=plx.unique_name("artifacts")
    )
    finished = plx.wait_for_status(gateway, submitted.uuid, {"succeeded", "failed"}, timeout_s=90)
    assert finished.status == "succeeded"
    root = Path(polyaxon_stack.store) / submitted.uuid
    for relative, content in TREE.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(content)
    (root / "outputs" / "empty-folder").mkdir()
    return submitted.uuid, root


def test_tree_walks_nested_folders_with_sizes(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    expected = sorted((ArtifactFile(path, len(content)) for path, content in TREE.items()), key=lambda f: f.path)
    assert gateway.artifact_tree(uuid, "outputs") == expected
    # The same paths (relative to the run's root, POSIX), however the folder is spelled.
    assert gateway.artifact_tree(uuid, "/outputs/") == expected
    assert gateway.artifact_tree(uuid, "outputs/./data/..") == expected
    # The run's root holds the outputs and whatever else the run wrote (its logs).
    whole = gateway.artifact_tree(uuid)
    assert set(expected) <= set(whole)
    assert any(f.path.startswith("plxlogs/") for f in whole)


def test_tree_of_a_subfolder_keeps_paths_relative_to_the_run_root(
    gateway: PolyaxonGateway, run: tuple[str, Path]
) -> None:
    uuid, _ = run
    assert gateway.artifact_tree(uuid, "outputs/data/deep") == [
        ArtifactFile("outputs/data/deep/er/leaf.json", 8),
        ArtifactFile("outputs/data/deep/er/second leaf.txt", 19),
    ]


def test_tree_of_a_file_is_that_file(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    assert gateway.artifact_tree(uuid, "outputs/result.txt") == [ArtifactFile("outputs/result.txt", 7)]
    # The API answers a folder holding one file of its own name exactly like that file: the walk tells them apart.
    assert gateway.artifact_tree(uuid, "outputs/twin") == [ArtifactFile("outputs/twin/twin", 41)]


def test_missing_or_empty_path_is_an_empty_tree(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    assert gateway.artifact_tree(uuid, "outputs/no-such-folder") == []
    assert gateway.artifact_tree(uuid, "no/such/deep/folder") == []
    assert gateway.artifact_tree(uuid, "outputs/result.txt/below-a-file") == []
    assert gateway.artifact_tree(uuid, "outputs/empty-folder") == []


def test_tree_stops_past_max_entries(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    # outputs/data/deep: one folder `er` holding two files: three entries.
    assert len(gateway.artifact_tree(uuid, "outputs/data/deep", max_entries=3)) == 2
    with pytest.raises(GatewayError, match="more than 2 files and folders"):
        gateway.artifact_tree(uuid, "outputs/data/deep", max_entries=2)


def test_paths_leaving_the_run_are_refused(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    with pytest.raises(GatewayError, match="outside the run's artifacts"):
        gateway.artifact_tree(uuid, "../")
    with pytest.raises(GatewayError, match="outside the run's artifacts"):
        gateway.read_artifact(uuid, "outputs/../../other-run/outputs/result.txt", max_bytes=100)


def test_unknown_run_is_not_found(gateway: PolyaxonGateway) -> None:
    with pytest.raises(RunNotFoundError):
        gateway.artifact_tree("0" * 32)


def test_read_returns_the_exact_bytes(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    assert gateway.read_artifact(uuid, "outputs/data/binary.bin", max_bytes=len(BINARY)) == BINARY
    assert gateway.read_artifact(uuid, "outputs/empty.txt", max_bytes=0) == b""
    assert gateway.read_artifact(uuid, "outputs/large.bin", max_bytes=len(LARGE)) == LARGE


def test_read_refuses_a_file_over_max_bytes_without_downloading_it(
    polyaxon_stack: LocalPolyaxonStack, run: tuple[str, Path]
) -> None:
    uuid, _ = run
    with plx.CountingProxy(polyaxon_stack.host) as proxy:
        gw = PolyaxonGateway(host=proxy.host, token=None, project=plx.PROJECT)
        try:
            with pytest.raises(GatewayError, match=r"larger than the 10239 bytes .* \(10240 bytes\)"):
                gw.read_artifact(uuid, "outputs/data/binary.bin", max_bytes=len(BINARY) - 1)
        finally:
            gw.close()
    assert proxy.requests, "the gateway did not go through the proxy"
    assert not [path for _, path in proxy.requests if "/artifact?" in path]


def test_read_of_a_missing_file_or_a_folder(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, _ = run
    with pytest.raises(ArtifactNotFoundError, match=r"no artifact outputs/nope\.txt"):
        gateway.read_artifact(uuid, "outputs/nope.txt", max_bytes=100)
    with pytest.raises(ArtifactNotFoundError):
        gateway.hash_artifact(uuid, "nowhere/nope.txt")
    with pytest.raises(GatewayError, match="is a folder") as folder:
        gateway.read_artifact(uuid, "outputs/data", max_bytes=100)
    assert not isinstance(folder.value, ArtifactNotFoundError)
    with pytest.raises(GatewayError, match="needs a file path"):
        gateway.read_artifact(uuid, "/", max_bytes=100)


def test_hash_matches_hashlib_and_streams(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, root = run
    assert gateway.hash_artifact(uuid, "outputs/data/binary.bin") == (hashlib.sha256(BINARY).hexdigest(), 10240)
    assert gateway.hash_artifact(uuid, "outputs/empty.txt") == (hashlib.sha256(b"").hexdigest(), 0)
    tracemalloc.start()
    try:
        digest, count = gateway.hash_artifact(uuid, "outputs/large.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (digest, count) == (hashlib.sha256((root / "outputs" / "large.bin").read_bytes()).hexdigest(), len(LARGE))
    assert peak < len(LARGE) // 2, f"hashing a {len(LARGE)}-byte file peaked at {peak} bytes"


def test_a_file_changed_after_a_read_is_read_fresh(gateway: PolyaxonGateway, run: tuple[str, Path]) -> None:
    uuid, root = run
    live = root / "outputs" / "live" / "trainer_state.json"
    live.parent.mkdir(parents=True, exist_ok=True)
    live.write_bytes(b'{"step": 1}')
    assert gateway.read_artifact(uuid, "outputs/live/trainer_state.json", max_bytes=1000) == b'{"step": 1}'
    # Rewritten with another length: a stale server cache would answer the old bytes (or cut the new ones).
    live.write_bytes(b'{"step": 200, "done": true}')
    assert gateway.read_artifact(uuid, "outputs/live/trainer_state.json", max_bytes=1000) == (
        b'{"step": 200, "done": true}'
    )
    assert gateway.hash_artifact(uuid, "outputs/live/trainer_state.json") == (
        hashlib.sha256(b'{"step": 200, "done": true}').hexdigest(),
        27,
    )
    assert gateway.artifact_tree(uuid, "outputs/live") == [ArtifactFile("outputs/live/trainer_state.json", 27)]
