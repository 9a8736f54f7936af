"""RangedFile (block-aligned reads, bounded LRU, read-ahead on sequential scans, no HEAD when the size is
known) and StorePartitionSource (one LIST, files as RangedFiles, an absent partition is an error)."""

from __future__ import annotations

import builtins
import random
import threading
import time
from collections.abc import Sequence

import pytest

from kafkalog.errors import InvalidConfigurationError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore import MemoryStore
from kafkalog.objstore.files import PartitionSource, RandomAccessFile
from kafkalog.objstore.ranged import RangedFile, RangedSettings, StorePartitionSource, partition_prefixes
from kafkalog.objstore.store import ListResult, ObjectMeta
from s3_server import S3Server

DATA = random.Random(7).randbytes(100_000)


class RecordingStore(MemoryStore):
    """A MemoryStore that records every range it serves (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple[str, int, int]] = []
        self.lock = threading.Lock()

    def get_range(self, key: str, start: int, end: int) -> bytes:
        with self.lock:
            self.ranges.append((key, start, end))
        return super().get_range(key, start, end)

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        return [self.get_range(key, s, e) for s, e in ranges]


def _store() -> RecordingStore:
    s = RecordingStore()
    s.put("p/t-0/00000000000000000000.log", DATA)
    s.put("p/t-0/00000000000000000000.index", b"\1" * 24)
    s.put("p/t-0/leader-epoch-checkpoint", b"0\n1\n0 0\n")
    s.put("p/t-12/00000000000000000000.log", b"")
    s.put("p/not-a-partition/x", b"")
    s.stats.reset()
    return s


def test_random_preads_match_the_bytes_and_are_block_aligned() -> None:
    store = _store()
    settings = RangedSettings(block_size=4096, cache_blocks=3, readahead_blocks=0)
    f = RangedFile(store, "p/t-0/00000000000000000000.log", settings=settings)
    assert isinstance(f, RandomAccessFile)
    assert f.size == len(DATA) and store.stats.head_requests == 1
    rnd = random.Random(1)
    for _ in range(500):
        pos = rnd.randrange(0, len(DATA) + 10)
        n = rnd.choice([0, 1, 7, 100, 4095, 4096, 4097, 10_000, 30_000])
        assert f.pread(n, pos) == DATA[pos : pos + n]
        assert len(f._blocks) <= 3  # the LRU bound
    for _, start, end in store.ranges:
        assert start % 4096 == 0 and (end % 4096 == 0 or end == len(DATA))
    assert f.pread(10, len(DATA)) == b"" and f.pread(10, len(DATA) + 5) == b""
    with pytest.raises(ValueError):
        f.pread(-1, 0)
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f.pread(1, 0)


def test_cached_blocks_are_not_read_twice() -> None:
    store = _store()
    f = RangedFile(
        store, "p/t-0/00000000000000000000.log", size=len(DATA), settings=RangedSettings(4096, 2, 0)
    )
    assert store.stats.head_requests == 0  # the size was known
    for _ in range(3):
        f.pread(100, 10)
        f.pread(100, 4100)
    assert len(store.ranges) == 2


def _wait_for(predicate: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_sequential_scan_reads_ahead_and_every_block_once() -> None:
    store = _store()
    key = "p/t-0/00000000000000000000.log"
    f = RangedFile(
        store,
        key,
        size=len(DATA),
        settings=RangedSettings(block_size=8192, cache_blocks=2, readahead_blocks=2),
    )
    out = bytearray()
    pos = 0
    while chunk := f.pread(3000, pos):
        out += chunk
        pos += len(chunk)
        if pos == 6000:  # the second sequential read asked for blocks 1 and 2 ahead
            assert _wait_for(lambda: {(key, 8192, 16384), (key, 16384, 24576)} <= set(store.ranges))
    assert bytes(out) == DATA
    starts = sorted(s for _, s, _ in store.ranges)
    assert starts == sorted(set(starts))  # no block read twice
    assert len(starts) == -(-len(DATA) // 8192)
    assert store.stats.bytes_read == len(DATA)


class FailingBlockStore(RecordingStore):
    """Fails the GET of the block starting at ``fail_at`` (and counts how often it was asked)."""

    fail_at = 8192

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if start == self.fail_at:
            with self.lock:
                self.ranges.append((key, start, end))
            raise RemoteStorageError(f"injected failure of [{start}, {end})")
        return super().get_range(key, start, end)


def test_read_ahead_errors_surface_on_the_read_that_needs_the_block() -> None:
    store = FailingBlockStore()
    key = "k"
    store.put(key, DATA)
    f = RangedFile(
        store,
        key,
        size=len(DATA),
        settings=RangedSettings(block_size=8192, cache_blocks=2, readahead_blocks=1),
    )
    f.pread(100, 0)
    f.pread(100, 100)  # sequential: block 1 is read ahead, and fails in the background
    assert _wait_for(lambda: any(s == 8192 for _, s, _ in store.ranges))
    assert f.pread(100, 200) == DATA[200:300]  # a failed read-ahead does not disturb other blocks
    with pytest.raises(RemoteStorageError, match="injected failure"):
        f.pread(100, 8192 + 100)
    assert sum(s == 8192 for _, s, _ in store.ranges) == 1  # the failure was the read-ahead's, surfaced here


def test_settings_from_options() -> None:
    s = RangedSettings.from_options(
        {"storage.block.size": "1048576", "storage.block.cache.count": "8", "storage.readahead.blocks": "0"}
    )
    assert (s.block_size, s.cache_blocks, s.readahead_blocks) == (1 << 20, 8, 0)
    assert RangedSettings.from_options(None) == RangedSettings()
    with pytest.raises(InvalidConfigurationError, match=r"storage\.block\.size"):
        RangedSettings.from_options({"storage.block.size": "0"})
    with pytest.raises(InvalidConfigurationError, match=r"storage\.block\.cache\.count"):
        RangedSettings(cache_blocks=0)


def test_partition_source_lists_once_and_opens_without_head() -> None:
    store = _store()
    src = StorePartitionSource(store, "p/t-0", settings=RangedSettings(block_size=4096))
    assert isinstance(src, PartitionSource)
    assert src.name == "memory://p/t-0/"
    files = src.list_files()
    assert src.open("leader-epoch-checkpoint").name == "memory://p/t-0/leader-epoch-checkpoint"
    assert files == {
        "00000000000000000000.log": len(DATA),
        "00000000000000000000.index": 24,
        "leader-epoch-checkpoint": 8,
    }
    assert store.stats.list_requests == 1
    f = src.open("00000000000000000000.log")
    assert f.size == len(DATA) and f.pread(5, 4094) == DATA[4094:4099]
    assert store.stats.head_requests == 0
    assert src.read("leader-epoch-checkpoint") == b"0\n1\n0 0\n"
    with pytest.raises(FileNotFoundError):
        src.read("00000000000000000000.timeindex")
    with pytest.raises(FileNotFoundError):
        src.open("00000000000000000099.log")  # not listed: one HEAD, which finds nothing
    with pytest.raises(ValueError):
        src.open("../t-12/00000000000000000000.log")


def test_absent_partition_is_an_error_not_empty() -> None:
    store = _store()
    with pytest.raises(RemoteResourceNotFoundError, match="no such partition directory"):
        StorePartitionSource(store, "p/t-99").list_files()
    assert StorePartitionSource(store, "p/t-12/").list_files() == {"00000000000000000000.log": 0}


def test_a_file_read_whole_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    """``read`` of a partition directory's file (an index, a snapshot) takes at most
    ``storage.whole.file.max.bytes`` of memory: a bigger object is refused before its GET, naming the option."""
    from kafkalog.readonly.copies import CopiedPartitionSource

    store = MemoryStore(
        {"t-0/00000000000000000000.index": bytes(2048), "t-0/leader-epoch-checkpoint": b"0\n0\n"}
    )
    settings = RangedSettings.from_options({"storage.whole.file.max.bytes": "1024"})
    assert settings.whole_file_max_bytes == 1024
    for source in (
        StorePartitionSource(store, "t-0", settings=settings),
        CopiedPartitionSource(store, "t-0", settings=settings),
    ):
        for listed in (False, True):
            if listed:
                source.list_files()
            gets = store.stats.get_requests
            with pytest.raises(
                RemoteStorageError, match=r"2048 bytes, more than storage\.whole\.file\.max\.bytes"
            ):
                source.read("00000000000000000000.index")
            assert store.stats.get_requests == gets  # refused before the GET
            assert source.read("leader-epoch-checkpoint") == b"0\n0\n"
    assert RangedSettings().whole_file_max_bytes == 128 * 1024 * 1024
    with pytest.raises(InvalidConfigurationError):
        RangedSettings.from_options({"storage.whole.file.max.bytes": "0"})


class HugeObjectStore(MemoryStore):
    """A store whose HEAD and listing report a huge size for ``huge`` keys (as a hostile bucket would), and that
    fails the test if anything GETs one of them (a whole read would allocate that much)."""

    HUGE = 64 * 1024**3

    def __init__(self, objects: dict[str, bytes], huge: set[str]) -> None:
        super().__init__(objects)
        self.huge = huge

    def head(self, key: str) -> ObjectMeta:
        meta = super().head(key)
        return meta._replace(size=self.HUGE) if key in self.huge else meta

    def list(self, prefix: str = "", *, delimiter: bool = True) -> ListResult:
        listed = super().list(prefix, delimiter=delimiter)
        objects = [o._replace(size=self.HUGE) if o.key in self.huge else o for o in listed.objects]
        return ListResult(listed.prefixes, objects)

    def get(self, key: str) -> bytes:
        assert key not in self.huge, f"a whole GET of {key}, which claims {self.HUGE} bytes"
        return super().get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        assert key not in self.huge or end - start <= 1 << 20, f"a {end - start}-byte GET of {key}"
        return super().get_range(key, start, end)


@pytest.mark.parametrize(
    "name", ["log-start-offset-checkpoint", "replication-offset-checkpoint", "kafkalog-topics.json"]
)
def test_a_log_dir_checkpoint_read_from_a_copy_is_bounded(name: str) -> None:
    """A log dir's own files in a copy (its checkpoints, ``kafkalog-topics.json``) are read whole under the same
    bound as a partition's small files: one that HEAD reports huge is a typed error naming it and the option,
    with no GET (memory never follows a size the bucket claims)."""
    from kafkalog.readonly.log import ReadOnlyDataDir

    checkpoint = b"0\n1\nt 0 5\n"
    objects = {
        "t-0/00000000000000000000.log": b"",
        "log-start-offset-checkpoint": checkpoint,
        "replication-offset-checkpoint": checkpoint,
        "kafkalog-topics.json": b"{}",
    }
    store = HugeObjectStore(objects, {name})
    data_dir = ReadOnlyDataDir(
        "memory://huge", {"storage.whole.file.max.bytes": "4096"}, store=store, layout="logdir"
    )
    with pytest.raises(
        RemoteStorageError,
        match=rf"{name}: {HugeObjectStore.HUGE} bytes, more than storage\.whole\.file\.max\.bytes \(4096\)",
    ):
        _ = data_dir.log("t", 0, check=False).log_start_offset
    # within the bound they are read (the default bound, 128 MiB, applies without the option)
    fine = ReadOnlyDataDir("memory://fine", {}, store=MemoryStore(objects), layout="logdir")
    assert fine.log("t", 0, check=False).log_start_offset == 0  # clamped to the (empty) log's end


def test_partition_prefixes() -> None:
    assert partition_prefixes(_store(), "p") == {"t-0": "p/t-0/", "t-12": "p/t-12/"}


def test_ranged_scan_on_the_real_server(s3_server: S3Server) -> None:
    pytest.importorskip("obstore")
    bucket = s3_server.make_bucket("ranged")
    data = random.Random(3).randbytes(3 * 1024 * 1024 + 17)
    s3_server.open(f"s3://{bucket}").put("logs/t-0/00000000000000000000.log", data)
    store = s3_server.open(f"s3://{bucket}/logs")
    src = StorePartitionSource(store, "t-0", settings=RangedSettings(block_size=1 << 20, readahead_blocks=1))
    sizes = src.list_files()
    f = src.open("00000000000000000000.log")
    out = bytearray()
    while chunk := f.pread(256 * 1024, len(out)):
        out += chunk
    assert bytes(out) == data and sizes["00000000000000000000.log"] == len(data)
    assert store.stats.head_requests == 0
    assert store.stats.get_requests == 4  # one GET per 1 MiB block, each once
    assert store.stats.bytes_read == len(data)


def test_read_ahead_works_in_a_process_forked_after_it_started() -> None:
    import os

    store = _store()
    key = "p/t-0/00000000000000000000.log"
    settings = RangedSettings(block_size=8192, cache_blocks=2, readahead_blocks=2)

    def scan() -> bytes:
        f = RangedFile(store, key, size=len(DATA), settings=settings)
        out = bytearray()
        while chunk := f.pread(3000, len(out)):
            out += chunk
        return bytes(out)

    assert scan() == DATA  # the read-ahead threads now run in this process
    pid = os.fork()
    if pid == 0:  # the child: the parent's threads are gone; a scan must still finish
        try:
            code = 0 if scan() == DATA else 1
        except BaseException:
            code = 2
        os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's scan hung: its read-ahead was queued on the parent's threads")


def test_a_read_of_several_blocks_reads_ahead_and_fills_the_buffer_in_place() -> None:
    """A scan's read (more than one block, the reader's 16 MiB chunk) starts the read-ahead at once, so the
    next read finds its blocks fetched (old code: only the read after it, a sequential one, did; a scan of
    32 MiB segments in 16 MiB reads never overlapped a transfer); each missing block is its own GET, and
    ``readinto`` copies the blocks straight into the caller's buffer."""
    store = _store()
    key = "p/t-0/00000000000000000000.log"
    f = RangedFile(store, key, size=len(DATA), settings=RangedSettings(4096, 4, 2))
    buf = bytearray(10_000)
    assert f.readinto(memoryview(buf), 0) == 10_000 and bytes(buf) == DATA[:10_000]  # blocks 0-2
    assert _wait_for(lambda: {(key, 12288, 16384), (key, 16384, 20480)} <= set(store.ranges))
    assert sorted(store.ranges)[:3] == [(key, 0, 4096), (key, 4096, 8192), (key, 8192, 12288)]
    assert f.readinto(memoryview(buf)[:5], len(DATA) - 3) == 3 and bytes(buf[:3]) == DATA[-3:]
    assert f.readinto(memoryview(buf), len(DATA)) == 0


def test_prefetch_starts_the_first_blocks_of_a_file_the_scan_reaches_next() -> None:
    store = _store()
    key = "p/t-0/00000000000000000000.log"
    f = RangedFile(store, key, size=len(DATA), settings=RangedSettings(4096, 4, 3))
    f.prefetch(0)
    assert _wait_for(lambda: len(store.ranges) == 3)
    assert f.pread(5000, 0) == DATA[:5000]  # blocks 0 and 1 from the prefetch: no new GET for them
    assert sorted(s for _, s, _ in store.ranges)[:3] == [0, 4096, 8192]
    assert _wait_for(lambda: len(store.ranges) == 5)  # sequential from the prefetch: 3 blocks past block 1
    assert sorted(s for _, s, _ in store.ranges) == [0, 4096, 8192, 12288, 16384]
    f.close()
    f.prefetch(0)  # a closed file starts nothing
    assert len(store.ranges) == 5
