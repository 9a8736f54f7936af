"""Review of tiering (issue #25): a copy is durable before COPY_SEGMENT_FINISHED is published (after which local
retention may delete the local segment). Over a ``file://`` archive (a local disk or an NFS mount) the store's
``put`` wrote a temporary file and renamed it without an fsync of either the file or its directory: a power
loss after local retention could leave a FINISHED segment whose objects are empty or missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.objstore.local import LocalFileStore


def test_a_file_store_put_is_durable_on_return(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    root = tmp_path / "archive"
    store = LocalFileStore(str(root))
    store.put("t-abc/0/00000000000000000000-x.log", b"data" * 100)
    target = root / "t-abc" / "0" / "00000000000000000000-x.log"
    assert target.read_bytes() == b"data" * 100
    # the bytes (the temporary file renamed into place) and then the directory entry
    file_syncs = [i for i, p in enumerate(synced) if p.startswith(str(target) + ".")]
    dir_syncs = [i for i, p in enumerate(synced) if p == str(target.parent)]
    assert file_syncs, synced
    assert dir_syncs and dir_syncs[-1] > file_syncs[0], synced


def test_a_file_store_delete_is_durable_on_return(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DELETE_SEGMENT_FINISHED is published when the RSM's delete returns: the unlink's directory entry must be
    durable by then, or a power loss brings the objects back as orphans no metadata names."""
    root = tmp_path / "archive"
    store = LocalFileStore(str(root))
    store.put("t-abc/0/00000000000000000000-x.log", b"data")
    target = root / "t-abc" / "0" / "00000000000000000000-x.log"
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    store.delete("t-abc/0/00000000000000000000-x.log")
    assert not target.exists()
    assert synced == [str(target.parent)]
    store.delete("t-abc/0/00000000000000000000-x.log")  # already gone: nothing to make durable
    assert synced == [str(target.parent)]
