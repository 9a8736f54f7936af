"""The ObjectStore contract on every implementation that needs no server: kafkalog's ``MemoryStore``,
``LocalFileStore`` (``file://`` and paths) and ``ObstoreStore`` over obstore's own in-memory store; plus
``open_store``'s dispatch, pickling, and the typed error when obstore is missing."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import InvalidConfigurationError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore import MemoryStore, ObjectStore, open_store
from kafkalog.objstore.cloud import ObstoreStore, coalesced, open_cloud_store
from kafkalog.objstore.local import LocalFileStore
from kafkalog.objstore.open import forget_memory_store
from kafkalog.objstore.options import StoreConfig
from objstore.forks import in_forked_child

LOG = bytes(range(256)) * 40  # 10,240 bytes


def _obstore_memory() -> ObstoreStore:
    obstore = pytest.importorskip("obstore")
    return ObstoreStore(obstore.store.MemoryStore(), StoreConfig("memory", "memory://obstore", "", ""))


@pytest.fixture(params=["memory", "local", "obstore-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    if request.param == "memory":
        s: ObjectStore = MemoryStore()
    elif request.param == "local":
        s = LocalFileStore(str(tmp_path / "root"))
        (tmp_path / "root").mkdir()
    else:
        s = _obstore_memory()
    s.put("p/t-0/00000000000000000000.log", LOG)
    s.put("p/t-0/00000000000000000000.index", b"i" * 16)
    s.put("p/t-1/00000000000000000000.log", b"x")
    s.put("p/top", b"top")
    s.stats.reset()
    yield s


def test_list_with_and_without_delimiter(store: ObjectStore) -> None:
    root = store.list("")
    assert root.prefixes == ["p/"] and root.objects == []
    p = store.list("p/")
    assert p.prefixes == ["p/t-0/", "p/t-1/"]
    assert [(m.key, m.size) for m in p.objects] == [("p/top", 3)]
    t0 = store.list("p/t-0/")
    assert [(m.key, m.size) for m in t0.objects] == [
        ("p/t-0/00000000000000000000.index", 16),
        ("p/t-0/00000000000000000000.log", len(LOG)),
    ]
    deep = store.list("p/", delimiter=False)
    assert deep.prefixes == []
    assert [m.key for m in deep.objects] == [
        "p/t-0/00000000000000000000.index",
        "p/t-0/00000000000000000000.log",
        "p/t-1/00000000000000000000.log",
        "p/top",
    ]
    assert store.list("absent/") == ([], [])
    assert store.stats.list_requests == 5


def test_head_get_and_ranges(store: ObjectStore) -> None:
    key = "p/t-0/00000000000000000000.log"
    assert store.head(key).size == len(LOG)
    assert store.get(key) == LOG
    assert store.get_range(key, 100, 200) == LOG[100:200]
    assert store.get_range(key, 5, 5) == b""
    ranges = [(0, 10), (5000, 5100), (len(LOG) - 1, len(LOG)), (7, 7)]
    assert store.get_ranges(key, ranges) == [LOG[s:e] for s, e in ranges]
    assert store.stats.head_requests == 1
    assert store.stats.bytes_read >= len(LOG) + 100 + 111


def test_missing_objects_and_ranges_past_the_end(store: ObjectStore) -> None:
    key = "p/t-0/00000000000000000000.log"
    for call in (
        lambda: store.head("p/nope"),
        lambda: store.get("p/nope"),
        lambda: store.get_range("p/nope", 0, 1),
    ):
        with pytest.raises(RemoteResourceNotFoundError, match="nope"):
            call()
    with pytest.raises(RemoteStorageError):
        store.get_range(key, len(LOG) - 5, len(LOG) + 5)
    with pytest.raises(RemoteStorageError):
        store.get_ranges(key, [(0, 1), (len(LOG), len(LOG) + 1)])


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.delete("p/top")
    store.delete("p/top")
    with pytest.raises(RemoteResourceNotFoundError):
        store.head("p/top")


def test_obstore_get_ranges_counts_coalesced_requests() -> None:
    s = _obstore_memory()
    data = bytes(4 * 1024 * 1024)
    s.put("k", data)
    s.stats.reset()
    mib = 1024 * 1024
    # two near ranges share one request, a range 3 MiB away needs its own
    out = s.get_ranges("k", [(0, 100), (200, 300), (3 * mib + 500, 3 * mib + 600)])
    assert [len(b) for b in out] == [100, 100, 100]
    assert s.stats.get_requests == 2
    assert s.stats.bytes_read == 300 + 100
    assert coalesced([(10, 20), (0, 5), (30, 40)], gap=4) == [(0, 5), (10, 20), (30, 40)]
    assert coalesced([(10, 20), (0, 5), (25, 40)], gap=5) == [(0, 40)]
    assert coalesced([(10, 20), (0, 5), (26, 40)], gap=5) == [(0, 20), (26, 40)]


def test_local_store_keys_never_leave_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    s = LocalFileStore(str(root))
    for bad in ("../escape", "a/../../escape", "/abs", "a//b", "", "a/./b"):
        with pytest.raises(RemoteStorageError, match="not a valid object key"):
            s.put(bad, b"x")
        with pytest.raises(RemoteStorageError, match="not a valid object key"):
            s.get(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    assert list(root.iterdir()) == []


def test_local_store_absent_root_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(RemoteResourceNotFoundError, match="does not exist"):
        LocalFileStore(str(tmp_path / "absent")).list("")


def test_open_store_dispatch(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), LocalFileStore)
    local = open_store(f"file://{tmp_path}")
    assert isinstance(local, LocalFileStore) and local.url == f"file://{tmp_path}"
    try:
        a = open_store("memory://shared-test")
        a.put("k", b"v")
        assert open_store("memory://shared-test").get("k") == b"v"  # one store per name in a process
        assert open_store("memory://other-test").list("") == ([], [])
    finally:
        forget_memory_store("shared-test")
        forget_memory_store("other-test")
    with pytest.raises(InvalidConfigurationError):
        open_store("ftp://host/x")


def test_cloud_store_repr_pickle_and_no_io_on_open() -> None:
    pytest.importorskip("obstore")
    secret = "SECRET-never-shown-0123456789"
    options = {
        "fs.s3a.endpoint": "http://127.0.0.1:1",
        "fs.s3a.secret.key": secret,
        "fs.s3a.access.key": "AK",
    }
    s = open_store("s3a://bucket/prefix", options)
    assert isinstance(s, ObstoreStore)
    assert s.url == "s3a://bucket/prefix"
    assert secret not in repr(s) and secret not in repr(s.config)
    again = pickle.loads(pickle.dumps(s))  # re-opened from URL and options on the other side
    assert isinstance(again, ObstoreStore) and again.config.config == s.config.config
    # ... once per process: the tasks a worker unpickles share one client (and its connections)
    assert pickle.loads(pickle.dumps(s)) is again
    other = pickle.loads(
        pickle.dumps(open_store("s3a://bucket/prefix", {**options, "fs.s3a.access.key": "AK2"}))
    )
    assert other is not again


def test_missing_obstore_is_a_typed_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "obstore", None)  # import obstore -> ImportError
    with pytest.raises(RemoteStorageError, match=r"pip install 'kafkalog\[cloud\]'"):
        open_store("s3://bucket/x")
    with pytest.raises(RemoteStorageError, match=r"kafkalog\[cloud\]"):
        open_cloud_store("gs://bucket/x")


def test_gcs_and_azure_open_offline_and_refuse_bad_credentials_without_echoing_them() -> None:
    pytest.importorskip("obstore")
    assert open_store("gs://bucket/p").url == "gs://bucket/p"  # no I/O when opening
    s = open_store(
        "abfss://c@acct.dfs.core.windows.net/d",
        {"fs.azure.account.key.acct.dfs.core.windows.net": "c2VjcmV0"},
    )
    assert "c2VjcmV0" not in repr(s) and "c2VjcmV0" not in repr(s.config)  # type: ignore[attr-defined]
    with pytest.raises(InvalidConfigurationError, match=r"fs\.gs\.auth\.service\.account\.json\.keyfile"):
        open_store("gs://bucket/p", {"fs.gs.auth.service.account.json.keyfile": "/nonexistent/key.json"})
    bad_key = "not-base64!!SECRET-VALUE"
    with pytest.raises(InvalidConfigurationError) as info:
        open_store("az://c/d", {"fs.azure.account.key.acct.dfs.core.windows.net": bad_key})
    assert bad_key not in str(info.value) and "fs.azure.account.key" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_local_puts_of_one_key_from_many_threads_leave_one_whole_object(tmp_path: Path) -> None:
    import threading

    s = LocalFileStore(str(tmp_path))
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def put(data: bytes) -> None:
        try:
            for _ in range(20):
                s.put("d/k", data)
        except BaseException as exc:  # a shared temporary name: one thread renames another's file away
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert s.get("d/k") in payloads
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["k"]  # no temporary file left behind


def test_local_store_never_follows_links_out_of_its_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"not yours")
    root = tmp_path / "root"
    (root / "p").mkdir(parents=True)
    (root / "p" / "real.log").write_bytes(b"mine")
    (root / "p" / "link.log").symlink_to(outside / "secret")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    s = LocalFileStore(str(root))
    assert [m.key for m in s.list("p/").objects] == ["p/real.log"]  # the link is not an object
    assert [m.key for m in s.list("", delimiter=False).objects] == ["p/real.log"]
    with pytest.raises(RemoteStorageError, match="outside the store"):
        s.get("p/link.log")
    (root / "p" / "inner.log").symlink_to(root / "p" / "real.log")  # a link, even inside: not an object
    with pytest.raises(RemoteResourceNotFoundError, match="not a regular file"):
        s.get("p/inner.log")
    for key in ("escape/secret", "escape/new"):
        with pytest.raises(RemoteStorageError, match="outside the store"):
            s.get(key)
        with pytest.raises(RemoteStorageError, match="outside the store"):
            s.put(key, b"x")
        with pytest.raises(RemoteStorageError, match="outside the store"):
            s.delete(key)
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_bytes() == b"not yours"


@pytest.mark.parametrize("kind", ["local", "obstore-memory"])
@pytest.mark.parametrize("bad", ["", "../x", "a/../../x", "/abs", "a//b", "a/./b", "a/", "."])
def test_invalid_keys_are_refused_before_any_request(kind: str, bad: str, tmp_path: Path) -> None:
    s: ObjectStore = LocalFileStore(str(tmp_path)) if kind == "local" else _obstore_memory()
    for call in (
        lambda: s.put(bad, b"x"),
        lambda: s.get(bad),
        lambda: s.head(bad),
        lambda: s.get_range(bad, 0, 1),
        lambda: s.get_ranges(bad, [(0, 1)]),
        lambda: s.delete(bad),
    ):
        with pytest.raises(RemoteStorageError, match="not a valid object key"):
            call()
    assert s.list("", delimiter=False) == ([], [])  # nothing was written (an empty key was the prefix object)
    assert (s.stats.get_requests, s.stats.head_requests) == (0, 0)
    with pytest.raises(RemoteStorageError, match="not a valid object key"):
        s.list("../")


def test_obstore_in_a_forked_child_is_a_typed_error_not_a_hang() -> None:
    s = _obstore_memory()
    s.put("k", b"v")
    assert s.get("k") == b"v"  # obstore's runtime now runs in this process

    def child() -> bool:
        try:
            s.get("k")
        except RemoteStorageError as exc:
            return "forked" in str(exc) and "spawn" in str(exc)
        return False

    assert in_forked_child(child) == 0  # a clear error, where the request used to wait forever


def test_put_stream_writes_the_chunks_as_one_object_or_nothing(store: ObjectStore) -> None:
    from kafkalog.objstore.store import PUT_PART_SIZE

    chunks = [bytes([i]) * 3_000_001 for i in range(7)]  # several parts of a multipart upload, odd sizes
    store.put_stream("s/big", iter(chunks))
    assert store.get("s/big") == b"".join(chunks)
    assert sum(map(len, chunks)) > 2 * PUT_PART_SIZE
    store.put_stream("s/empty", iter(()))
    assert store.get("s/empty") == b""

    def failing() -> Iterator[bytes]:
        yield b"half"
        raise RemoteStorageError("cannot read the segment to copy it")

    with pytest.raises(RemoteStorageError, match="cannot read the segment"):
        store.put_stream("s/torn", failing())
    with pytest.raises(RemoteResourceNotFoundError):
        store.get("s/torn")  # a failed stream leaves no object behind
    assert store.get("s/big") == b"".join(chunks)


def test_obstore_put_stream_hands_obstore_part_sized_buffers() -> None:
    from kafkalog.objstore.cloud import _parts

    small = [b"a" * 100] * 25
    assert [len(p) for p in _parts(iter(small), 1_000)] == [1_000, 1_000, 500]
    big = [b"b" * 5_000, b"c" * 10]
    parts = list(_parts(iter(big), 1_000))
    assert parts[0] is big[0] and parts[1] == big[1]  # a chunk already part-sized is not copied


def test_local_put_is_durable_when_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    s = LocalFileStore(str(tmp_path))
    s.put("tier/t-0/seg.log", b"a" * 10 + b"b" * 10)
    # the directories put created (their entries in their parents), the data (its temporary name, before the
    # rename) and then the directory holding the new name
    data = [i for i, p in enumerate(synced) if p.endswith(".tmp")]
    assert len(data) == 1 and os.path.dirname(synced[data[0]]) == str(tmp_path / "tier" / "t-0")
    assert synced[-1] == str(tmp_path / "tier" / "t-0") and data[0] == len(synced) - 2
    assert set(synced[: data[0]]) == {str(tmp_path), str(tmp_path / "tier")}
    assert s.get("tier/t-0/seg.log") == b"a" * 10 + b"b" * 10
