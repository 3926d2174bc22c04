"""The content manifest of a folder (`trainer.digests`): what is listed, the canonical digest, the atomic write."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trainer.checkpoints import META_FILE
from trainer.digests import (
    MANIFEST_FILE,
    file_entries,
    file_sha256,
    folder_digest,
    manifest_digest,
    read_manifest,
    write_manifest,
)


def make_folder(root: Path) -> Path:
    """A small checkpoint-like folder with a nested file."""
    root.mkdir()
    (root / "model.safetensors").write_bytes(b"\x00\x01weights" * 100)
    (root / "config.json").write_text('{"a": 1}\n')
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("nested\n")
    return root


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_entries_are_every_regular_file_sorted_by_relative_posix_path(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "ckpt")
    entries = file_entries(folder)
    assert [e["path"] for e in entries] == ["config.json", "model.safetensors", "sub/b.txt"]
    assert entries[2] == {"path": "sub/b.txt", "size": 7, "sha256": sha(b"nested\n")}


def test_manifest_marker_hidden_files_and_links_are_not_listed(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "ckpt")
    before = file_entries(folder)
    (folder / MANIFEST_FILE).write_text("{}")
    (folder / META_FILE).write_text("{}")
    (folder / ".finetune_checkpoint.json.tmp").write_text("half")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "x").write_text("x")
    (folder / "link.json").symlink_to(folder / "config.json")
    assert file_entries(folder) == before


def test_digest_is_sha256_of_one_tab_separated_line_per_file(tmp_path: Path) -> None:
    """The canonical form the bot re-computes from the files it downloads."""
    folder = make_folder(tmp_path / "ckpt")
    text = "".join(
        f"{path}\t{len(data)}\t{sha(data)}\n"
        for path, data in sorted(
            {
                "config.json": b'{"a": 1}\n',
                "model.safetensors": b"\x00\x01weights" * 100,
                "sub/b.txt": b"nested\n",
            }.items()
        )
    )
    assert folder_digest(file_entries(folder)) == "sha256:" + sha(text.encode("utf-8"))


def test_one_changed_byte_changes_the_digest(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "ckpt")
    digest = folder_digest(file_entries(folder))
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[5] ^= 0x01
    weights.write_bytes(bytes(data))
    assert folder_digest(file_entries(folder)) != digest


def test_a_renamed_file_changes_the_digest(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "ckpt")
    digest = folder_digest(file_entries(folder))
    (folder / "sub" / "b.txt").rename(folder / "sub" / "c.txt")
    assert folder_digest(file_entries(folder)) != digest


def test_write_manifest_writes_the_document_atomically(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "ckpt")
    digest = write_manifest(folder)
    document = json.loads((folder / MANIFEST_FILE).read_text())
    assert document == {"version": 1, "digest": digest, "files": file_entries(folder)}
    assert digest == folder_digest(document["files"])
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
    # Writing it again describes the same content: the manifest does not list itself.
    assert write_manifest(folder) == digest
    assert manifest_digest(folder) == digest


def test_unreadable_or_foreign_manifests_read_as_none(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "ckpt")
    assert read_manifest(folder) is None and manifest_digest(folder) is None
    (folder / MANIFEST_FILE).write_text("{not json")
    assert manifest_digest(folder) is None
    (folder / MANIFEST_FILE).write_text(json.dumps({"version": 2, "digest": "sha256:x", "files": []}))
    assert manifest_digest(folder) is None


def test_file_sha256_streams_large_files(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    data = bytes(range(256)) * (5 * 4096 + 3)  # over 5 MiB: several chunks
    path.write_bytes(data)
    assert file_sha256(path) == sha(data)
