"""Loading a partition directory and repairing what a crash left behind (Kafka's ``LogLoader``).

:func:`load_log` is a function: it reads the directory and returns a :class:`LoadedLog` (segments, offsets);
it does not touch a ``Log``. The passes, in order:

1. **Temporary files** — delete ``*.deleted``; collect ``*.cleaned`` (remember the smallest offset) and
   ``*.swap``. For a ``.swap`` log the plain index files of that base are deleted (they are rebuilt);
   swaps at or above the smallest ``.cleaned`` offset belong to an interrupted split and are deleted
   (KAFKA-6264); then every ``.cleaned`` file is deleted. A file that cannot be read is an error.
2. **Interrupted swaps** — the segments that the remaining ``.swap`` logs replace (offsets in
   ``[min swap base, max swap next offset)``) are deleted, then ``.swap`` is stripped from every file.
3. **Segments** — ``.log`` files in name order become segments; an index file with no ``.log`` is an
   orphan and is deleted; a segment with a missing or corrupt index is recovered (indexes rebuilt) once
   all are loaded — unless pass 4 recovers it anyway, which it then leaves to pass 4 (in order, after the
   segments before it are validated). A legacy segment whose offsets overflow is split and the pass
   restarts (``retry_on_offset_overflow``).
4. **Recovery** — with a clean-shutdown marker nothing is scanned. Without one, every segment from the
   recovery point on is recovered (CRC of every batch, indexes rebuilt, producer state replayed, and a
   producer snapshot taken at its end so the next one starts there); at the first invalid batch the
   segment is truncated and every later segment deleted. If the log end ends up
   below the log start offset all segments are deleted; with no segment left an empty one is created at
   the log start offset. The active segment's indexes get their preallocation back.
5. **State** — the log start offset is the checkpoint's, raised to the first segment's base offset unless
   the log has a remote tier (then the remote tier serves the offsets below the first local segment, as
   Kafka's ``LogLoader`` keeps them); the leader epoch cache is truncated to the loaded log and from the
   start to the checkpoint (so it keeps the epochs of the remote range); stray producer snapshots are
   removed and producer state is rebuilt from the newest usable snapshot plus the segments after it.

Cost of a clean open (issue #5: 10,000 segments in well under a second): the listing of
:func:`check_partition_dir` (entry types come with it: about 1 us per file), then one directory listing shared
by passes 1 and 3 when pass 1 changed nothing; one readability check per file (Kafka's ``canRead``, relative
to a directory descriptor); one ``lstat`` per ``.log`` (its size). Index files are only looked up in the listing:
no index of a non-active segment is opened, and its index objects are not even made until it is read.

**The directory is the boundary.** Before anything is read or changed, :func:`check_partition_dir` (called by
``Log.open``) refuses a partition directory that is a symbolic link, any segment, index, snapshot or
checkpoint file in it that is not a regular file (a symlink, FIFO, directory or device: nothing is followed,
opened or repaired), and any segment or snapshot name whose offset is above ``2**63 - 1``; the refusal is a
:class:`~kafkalog.errors.KafkaStorageError` and the directory is left exactly as it was.

A ``-delete`` directory loads without recovery. The recovery point is the log end offset after a clean
shutdown of a non-empty log, else ``min(checkpointed recovery point, log end offset)``.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from kafkalog.errors import (
    CorruptIndexError,
    InvalidOffsetError,
    KafkaError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
    NotRegularFileError,
)
from kafkalog.log.checkpoint import CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE
from kafkalog.log.config import LogConfig
from kafkalog.log.leader_epoch import LeaderEpochFileCache
from kafkalog.log.local_log import delete_segment_files, open_segment, replace_segments
from kafkalog.log.names import DELETE_DIR_SUFFIX, TopicPartition
from kafkalog.log.producer_state import CompletedTxn, ProducerAppendInfo, ProducerStateManager
from kafkalog.log.scheduler import Scheduler
from kafkalog.log.segments import LogSegments
from kafkalog.log.types import AppendOrigin
from kafkalog.storage import LogOffsetMetadata, LogSegment
from kafkalog.storage.files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    file_kind,
    is_index_file,
    is_log_file,
    is_segment_file_name,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from kafkalog.storage.segment import TO_SEGMENT_END
from kafkalog.time import Time

__all__ = [
    "LoadedLog",
    "check_partition_dir",
    "load_log",
    "rebuild_producer_state",
    "split_overflowed_segment",
]

_log = logging.getLogger("kafkalog.log.loader")


@dataclass
class LoadedLog:
    """What loading produced: the segments and the offsets they define."""

    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata
    segments_recovered: int = 0
    bytes_truncated: int = 0


def _delete_indexes_if_exist(directory: Path, base_offset: int, suffix: str = "") -> None:
    for path in (
        offset_index_file(directory, base_offset, suffix),
        time_index_file(directory, base_offset, suffix),
        transaction_index_file(directory, base_offset, suffix),
    ):
        path.unlink(missing_ok=True)


_CHECKPOINT_NAMES = (LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE, CLEAN_SHUTDOWN_FILE)


def _is_owned(name: str) -> bool:
    """Whether ``name`` is one of the files kafkalog keeps in a partition directory (a checkpoint's ``.tmp``
    is not: it is never read, and the next write replaces whatever is there)."""
    return name in _CHECKPOINT_NAMES or is_segment_file_name(name)


#: The largest offset as the 20 digits of a file name: a 20-digit prefix above it is out of range.
_MAX_OFFSET_DIGITS = f"{2**63 - 1:020d}"


def _file_names(directory: Path) -> list[str]:
    """Names of the regular files in ``directory``, sorted (one listing, no per-file stat; a link is not one)."""
    with os.scandir(directory) as entries:
        return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))


def check_partition_dir(directory: Path) -> None:
    """Refuse a partition directory that is a symbolic link or not a directory, or that holds a segment,
    index, snapshot or checkpoint file that is not a regular file (:class:`NotRegularFileError`), or a
    segment or snapshot name above ``2**63 - 1`` (:class:`KafkaStorageError`); see the module doc.

    One listing, no per-file stat (the entry types come with it); ``Log.open`` calls it before anything.
    """
    mode = os.lstat(directory).st_mode
    if not stat.S_ISDIR(mode):
        raise NotRegularFileError(
            f"refusing partition directory {directory}: it is a {file_kind(mode)}, not a directory (kafkalog "
            "only reads and writes inside the data directory)"
        )
    with os.scandir(directory) as entries:
        for e in entries:
            name = e.name
            if e.is_file(follow_symlinks=False):
                dot = name.find(".")
                # Kafka's 20-digit names at or below the largest offset are the common case: no parse.
                if dot >= 19 and (dot != 20 or name[:20] > _MAX_OFFSET_DIGITS) and is_segment_file_name(name):
                    try:
                        offset_from_file_name(name)  # KafkaStorageError above 2**63 - 1
                    except ValueError:
                        pass
            elif _is_owned(name):
                mode = e.stat(follow_symlinks=False).st_mode
                raise NotRegularFileError(
                    f"refusing {directory / name}: it is a {file_kind(mode)}, not a regular file (kafkalog only "
                    "reads and writes regular files inside the data directory)"
                )


class _Readable:
    """``os.access(name, R_OK)`` for the files of one directory, relative to a descriptor of it when the
    platform allows (no path walk per file: half the cost on a directory of 30,000 files)."""

    def __init__(self, directory: Path) -> None:
        self.directory = os.fspath(directory)
        self.dir_fd: int | None = None
        if os.access in os.supports_dir_fd:
            flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
            try:
                self.dir_fd = os.open(self.directory, flags)
            except OSError:
                self.dir_fd = None

    def __call__(self, name: str) -> bool:
        if self.dir_fd is not None:
            return os.access(name, os.R_OK, dir_fd=self.dir_fd)
        return os.access(os.path.join(self.directory, name), os.R_OK)

    def close(self) -> None:
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None


def _remove_temp_files_and_collect_swap_files(
    directory: Path, prefix: str
) -> tuple[list[Path], list[str] | None]:
    """Pass 1 (see the module doc): the valid ``.swap`` logs, and the directory listing when this pass
    changed nothing in the directory (so pass 3 can use it instead of listing the directory again)."""
    swap_files: list[Path] = []
    cleaned_files: list[Path] = []
    names = _file_names(directory)
    changed = False
    readable = _Readable(directory)
    try:
        for name in names:
            if not readable(name):
                if not os.path.exists(os.path.join(directory, name)):
                    continue  # removed earlier in this pass (indexes of an interrupted swap)
                raise KafkaStorageError(f"could not read file {directory / name}")
            if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)):
                changed = True
                _collect_temp_file(directory, name, prefix, swap_files, cleaned_files)
    finally:
        readable.close()
    min_cleaned = 2**63 - 1
    for path in cleaned_files:
        try:
            min_cleaned = min(offset_from_file_name(path.name), min_cleaned)
        except ValueError:
            pass
    valid = []
    for path in swap_files:
        if offset_from_file_name(path.name) >= min_cleaned:
            _log.debug("%sDeleting invalid swap file %s minKafkaCleanedOffset %d", prefix, path, min_cleaned)
            path.unlink(missing_ok=True)
        else:
            valid.append(path)
    for path in cleaned_files:
        path.unlink(missing_ok=True)
    return valid, None if changed else names


def _collect_temp_file(
    directory: Path, name: str, prefix: str, swap_files: list[Path], cleaned_files: list[Path]
) -> None:
    """One ``.deleted`` (removed now), ``.cleaned`` (collected) or ``.swap`` (collected) file of pass 1."""
    path = directory / name
    if name.endswith(DELETED_FILE_SUFFIX) and not name.endswith(".checkpoint" + DELETED_FILE_SUFFIX):
        _log.debug("%sDeleting stray temporary file %s", prefix, path)
        path.unlink(missing_ok=True)
    elif name.endswith(CLEANED_FILE_SUFFIX):
        cleaned_files.append(path)
    elif name.endswith(SWAP_FILE_SUFFIX):
        base = name[: -len(SWAP_FILE_SUFFIX)]
        _log.info("%sFound file %s from interrupted swap operation.", prefix, path)
        try:
            offset = offset_from_file_name(base)
        except ValueError:
            return
        if is_index_file(base):
            _delete_indexes_if_exist(directory, offset)
        elif is_log_file(base):
            _delete_indexes_if_exist(directory, offset)
            swap_files.append(path)


def _complete_swaps(
    directory: Path, swap_files: list[Path], config: LogConfig, time: Time, prefix: str
) -> None:
    min_swap = 2**63 - 1
    max_swap = -(2**63)
    for path in swap_files:
        base = offset_from_file_name(path.name)
        segment = open_segment(
            directory,
            base,
            config,
            time,
            file_already_exists=True,
            file_suffix=SWAP_FILE_SUFFIX,
            preallocate=False,
        )
        _log.info(
            "%sFound log file %s from interrupted swap operation, which is recoverable from .swap files by "
            "renaming.",
            prefix,
            path,
        )
        min_swap = min(min_swap, segment.base_offset)
        max_swap = max(max_swap, segment.read_next_offset())
        segment.close_handlers()
    if swap_files:
        for name in _file_names(directory):
            if name.endswith(SWAP_FILE_SUFFIX):
                continue
            try:
                offset = offset_from_file_name(name)
            except ValueError:
                continue
            if min_swap <= offset < max_swap:
                _log.info(
                    "%sDeleting segment files %s that is compacted but has not been deleted yet.",
                    prefix,
                    name,
                )
                (directory / name).unlink(missing_ok=True)
    # Every remaining .swap file (index swaps included) becomes a regular file; indexes are rebuilt later.
    for name in _file_names(directory):
        if name.endswith(SWAP_FILE_SUFFIX):
            _log.info("%sRecovering file %s by renaming from .swap files.", prefix, name)
            os.replace(directory / name, directory / name[: -len(SWAP_FILE_SUFFIX)])


class _Loader:
    def __init__(
        self,
        directory: Path,
        tp: TopicPartition,
        config: LogConfig,
        scheduler: Scheduler | None,
        time: Time,
        had_clean_shutdown: bool,
        log_start_offset_checkpoint: int,
        recovery_point_checkpoint: int,
        leader_epoch_cache: LeaderEpochFileCache | None,
        producer_state: ProducerStateManager,
    ) -> None:
        self.dir = directory
        self.tp = tp
        self.config = config
        self.scheduler = scheduler
        self.time = time
        self.had_clean_shutdown = had_clean_shutdown
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self.segments = LogSegments()
        self.prefix = f"[LogLoader partition={tp}, dir={directory.parent}] "
        self.recovered = 0
        self.truncated_bytes = 0

    def _recover_segment(self, segment: LogSegment) -> int:
        psm = ProducerStateManager(
            str(self.tp),
            self.dir,
            self.producer_state.max_transaction_timeout_ms,
            self.producer_state.producer_id_expiration_ms,
            self.time,
        )
        rebuild_producer_state(
            psm,
            self.segments,
            self.log_start_offset_checkpoint,
            segment.base_offset,
            self.time,
            reload_from_clean_shutdown=False,
            prefix=self.prefix,
        )
        truncated = segment.recover(psm, self.epoch_cache)
        # Kafka's segment recovery moves the map end offset past every batch it replays, so this snapshot lands at
        # the end of the recovered segment and the next segment's rebuild starts there instead of re-reading it.
        psm.update_map_end_offset(segment.read_next_offset())
        psm.take_snapshot()
        self.recovered += 1
        return truncated

    def load_segment_files(self, names: list[str] | None = None) -> None:
        """Pass 3 (see the module doc) over ``names`` (the directory's sorted file names; listed if None).

        A clean segment costs one ``stat`` of its ``.log``: index files are only looked up in the listing.
        """
        needs_recovery: list[LogSegment] = []
        if names is None:
            names = _file_names(self.dir)
        present = set(names)
        for name in names:
            if is_index_file(name):
                digits = name.split(".", 1)[0]
                if not digits.isdigit():
                    continue
                if digits + ".log" not in present:
                    path = self.dir / name
                    _log.warning(
                        "%sFound an orphaned index file %s, with no corresponding log file.",
                        self.prefix,
                        path,
                    )
                    path.unlink(missing_ok=True)
            elif is_log_file(name):
                try:
                    base = offset_from_file_name(name)
                except ValueError:
                    continue
                stem = name[: -len(".log")]
                segment = open_segment(self.dir, base, self.config, self.time, file_already_exists=True)
                path = segment.log.path
                try:
                    if stem + ".index" not in present or stem + ".timeindex" not in present:
                        raise FileNotFoundError(f"offset or time index file of {path} does not exist")
                    if stem + ".txnindex" in present:
                        segment.txn_index.sanity_check()
                except FileNotFoundError:
                    if self.had_clean_shutdown or base < self.recovery_point_checkpoint:
                        _log.error(
                            "%sCould not find index file corresponding to log file %s, recovering segment and "
                            "rebuilding index files...",
                            self.prefix,
                            path,
                        )
                    needs_recovery.append(segment)
                except CorruptIndexError as exc:
                    _log.warning(
                        "%sFound a corrupted index file corresponding to log file %s due to %s, recovering "
                        "segment and rebuilding index files...",
                        self.prefix,
                        path,
                        exc,
                    )
                    needs_recovery.append(segment)
                self.segments.add(segment)
        # A segment that the recovery of the unflushed segments will recover anyway is left to it: recovering it
        # here would rebuild its producer state from the segments before it, which may be unflushed and not yet
        # validated (a torn tail must be truncated by the recovery, in order, which then drops what follows).
        recovered_later = set()
        if not self.had_clean_shutdown and not self.dir.name.endswith(DELETE_DIR_SUFFIX):
            recovered_later = {
                s.base_offset for s in self.segments.values(self.recovery_point_checkpoint, 2**63 - 1)
            }
        for segment in needs_recovery:
            if segment.base_offset not in recovered_later:
                self._recover_segment(segment)

    def _delete_async(self, segments: list[LogSegment]) -> None:
        for s in segments:
            self.segments.remove(s.base_offset)
        delete_segment_files(segments, True, self.dir, self.scheduler, self.config, self.prefix)

    def recover_log(self) -> tuple[int, int]:
        if not self.had_clean_shutdown:
            unflushed = self.segments.values(self.recovery_point_checkpoint, 2**63 - 1)
            for i, segment in enumerate(unflushed):
                _log.info(
                    "%sRecovering unflushed segment %d. %d/%d recovered for %s.",
                    self.prefix,
                    segment.base_offset,
                    i,
                    len(unflushed),
                    self.tp,
                )
                try:
                    truncated = self._recover_segment(segment)
                except InvalidOffsetError:
                    _log.warning(
                        "%sFound invalid offset during recovery. Deleting the corrupt segment and creating an "
                        "empty one with starting offset %d",
                        self.prefix,
                        segment.base_offset,
                    )
                    truncated = segment.truncate_to(segment.base_offset)
                if truncated > 0:
                    self.truncated_bytes += truncated
                    _log.warning(
                        "%sCorruption found in segment %d, truncating to offset %d",
                        self.prefix,
                        segment.base_offset,
                        segment.read_next_offset(),
                    )
                    self._delete_async(unflushed[i + 1 :])
                    break
        log_end: int | None = None
        last = self.segments.last_segment
        if last is not None:
            end = last.read_next_offset()
            if end >= self.log_start_offset_checkpoint:
                log_end = end
            else:
                _log.warning(
                    "%sDeleting all segments because logEndOffset (%d) is smaller than logStartOffset %d. This "
                    "could happen if segment files were deleted from the file system.",
                    self.prefix,
                    end,
                    self.log_start_offset_checkpoint,
                )
                self._delete_async(self.segments.values())
                if self.epoch_cache is not None:
                    self.epoch_cache.clear_and_flush()
                self.producer_state.truncate_fully_and_start_at(self.log_start_offset_checkpoint)
        if self.segments.is_empty:
            self.segments.add(
                open_segment(self.dir, self.log_start_offset_checkpoint, self.config, self.time)
            )
        if self.had_clean_shutdown and log_end is not None:
            return log_end, log_end
        end_offset = log_end if log_end is not None else self.segments.last_segment.read_next_offset()  # type: ignore[union-attr]
        return min(self.recovery_point_checkpoint, end_offset), end_offset


def _retry_on_offset_overflow(loader: _Loader, fn: str, names: list[str] | None = None) -> object:
    while True:
        try:
            if fn == "load":
                loader.segments.close_handlers()
                loader.segments.clear()
                # The listing from pass 1 is only good for the first attempt (a split changes the directory).
                listing, names = names, None
                loader.load_segment_files(listing)
                return None
            return loader.recover_log()
        except LogSegmentOffsetOverflowError as exc:
            segment = (
                loader.segments.get(exc.segment_base_offset) if exc.segment_base_offset is not None else None
            )
            if segment is None:
                raise
            next_offset = segment.read_next_offset()
            if not (
                next_offset > segment.base_offset
                and not segment.can_convert_to_relative_offset(next_offset - 1)
            ):
                # Kafka's splitOverflowedSegment fails its `require(hasOverflow)` here (IllegalArgumentException):
                # the segment ends inside its offset range, so the batch out of range is damaged, not a legacy
                # overflow a split could fix. A typed storage error, like every other unreadable segment.
                raise KafkaStorageError(
                    f"{loader.prefix}segment {segment.log.path} holds a batch whose offsets do not fit the "
                    f"segment ({exc}) but the segment does not overflow (next offset {next_offset}): a damaged "
                    "base offset"
                ) from exc
            _log.info("%sCaught segment overflow error: %s. Split segment and retry.", loader.prefix, exc)
            split_overflowed_segment(
                segment,
                loader.segments,
                loader.dir,
                loader.config,
                loader.scheduler,
                loader.time,
                loader.prefix,
            )


def load_log(
    directory: Path,
    tp: TopicPartition,
    config: LogConfig,
    *,
    scheduler: Scheduler | None,
    time: Time,
    had_clean_shutdown: bool,
    log_start_offset_checkpoint: int,
    recovery_point_checkpoint: int,
    leader_epoch_cache: LeaderEpochFileCache | None,
    producer_state: ProducerStateManager,
    remote_log_enabled: bool = False,
) -> LoadedLog:
    """Load (and if needed repair) a partition directory; see the module doc for the passes.

    With ``remote_log_enabled`` the log start offset is the checkpoint's even below the first local segment
    (the remote tier holds the offsets in between, Kafka's ``LogLoader``); otherwise it is at least the first
    segment's base offset."""
    loader = _Loader(
        directory,
        tp,
        config,
        scheduler,
        time,
        had_clean_shutdown,
        log_start_offset_checkpoint,
        recovery_point_checkpoint,
        leader_epoch_cache,
        producer_state,
    )
    swaps, names = _remove_temp_files_and_collect_swap_files(directory, loader.prefix)
    _complete_swaps(directory, swaps, config, time, loader.prefix)
    _retry_on_offset_overflow(loader, "load", None if swaps else names)
    if not directory.name.endswith(DELETE_DIR_SUFFIX):
        result = _retry_on_offset_overflow(loader, "recover")
        assert isinstance(result, tuple)
        recovery_point, next_offset = result
        active = loader.segments.last_segment
        assert active is not None
        active.resize_indexes(config.segment_index_bytes)
    else:
        if loader.segments.is_empty:
            loader.segments.add(open_segment(directory, 0, config, time))
        recovery_point, next_offset = 0, 0
    if leader_epoch_cache is not None:
        leader_epoch_cache.truncate_from_end(next_offset)
    first = loader.segments.first_segment
    assert first is not None
    new_log_start = (
        log_start_offset_checkpoint
        if remote_log_enabled
        else max(log_start_offset_checkpoint, first.base_offset)
    )
    if leader_epoch_cache is not None:
        leader_epoch_cache.truncate_from_start(log_start_offset_checkpoint)
    if not producer_state.is_empty:
        raise KafkaError("producer state must be empty during log initialization")
    producer_state.remove_stray_snapshots(loader.segments.base_offsets())
    rebuild_producer_state(
        producer_state,
        loader.segments,
        new_log_start,
        next_offset,
        time,
        reload_from_clean_shutdown=had_clean_shutdown,
        prefix=loader.prefix,
    )
    active = loader.segments.last_segment
    assert active is not None
    return LoadedLog(
        loader.segments,
        new_log_start,
        recovery_point,
        LogOffsetMetadata(next_offset, active.base_offset, active.size),
        loader.recovered,
        loader.truncated_bytes,
    )


def rebuild_producer_state(
    psm: ProducerStateManager,
    segments: LogSegments,
    log_start_offset: int,
    last_offset: int,
    time: Time,
    *,
    reload_from_clean_shutdown: bool,
    prefix: str = "",
) -> None:
    """Rebuild producer state up to ``last_offset`` from the newest usable snapshot and the segments after it.

    Snapshots are taken at the bases of the last two segments and at ``last_offset`` so the next rebuild is
    short. With no snapshot after a clean shutdown the scan is skipped (empty snapshots are written).
    """
    offsets_to_snapshot: list[int] = []
    last = segments.last_segment
    if last is not None:
        lower = segments.lower_segment(last.base_offset)
        if lower is not None:
            offsets_to_snapshot.append(lower.base_offset)
        offsets_to_snapshot.append(last.base_offset)
    offsets_to_snapshot.append(last_offset)
    _log.info("%sLoading producer state till offset %d", prefix, last_offset)
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for offset in offsets_to_snapshot:
            psm.update_map_end_offset(offset)
            psm.take_snapshot()
        return
    empty_before = psm.is_empty and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, time.milliseconds())
    if last_offset > psm.map_end_offset and not empty_before:
        segment_of_last = segments.floor_segment(last_offset)
        for segment in segments.values(psm.map_end_offset, last_offset):
            start = max(segment.base_offset, psm.map_end_offset, log_start_offset)
            psm.update_map_end_offset(start)
            if segment.base_offset in offsets_to_snapshot:
                psm.take_snapshot()
            max_position = TO_SEGMENT_END
            if segment is segment_of_last:
                found = segment.translate_offset(last_offset)
                if found is not None:
                    max_position = found.position
            info = segment.read(start, 2**31 - 1, max_position, False)
            if info is not None:
                _load_producers_from_batches(psm, info.records.batches())
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()


def _load_producers_from_batches(psm: ProducerStateManager, batches: object) -> None:
    loaded: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    for batch in batches:  # type: ignore[attr-defined]
        if batch.producer_id >= 0:
            info = loaded.get(batch.producer_id)
            if info is None:
                info = psm.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
                loaded[batch.producer_id] = info
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
    for info in loaded.values():
        psm.update(info)
    for txn in completed:
        psm.complete_txn(txn)


def split_overflowed_segment(
    segment: LogSegment,
    existing: LogSegments,
    directory: Path,
    config: LogConfig,
    scheduler: Scheduler | None,
    time: Time,
    prefix: str = "",
) -> list[LogSegment]:
    """Split a (legacy) segment whose offsets do not fit an int32 relative to its base into several segments.

    New segments are written as ``.cleaned`` and swapped in with :func:`replace_segments`; returns them.
    """
    if not is_log_file(segment.log.path.name):
        raise ValueError(f"cannot split file {segment.log.path}")
    next_offset = segment.read_next_offset()
    if not (
        next_offset > segment.base_offset and not segment.can_convert_to_relative_offset(next_offset - 1)
    ):
        raise ValueError(
            f"split operation is only permitted for segments with overflow, and the problem path is {segment.log.path}"
        )
    _log.info("%sSplitting overflowed segment %s", prefix, segment)
    new_segments: list[LogSegment] = []
    source = segment.log
    position = 0
    try:
        while position < source.size_in_bytes:
            first_batch = next(iter(source.batches(position)))
            base = first_batch.base_offset
            for path in (directory / f"{base:020d}.log{CLEANED_FILE_SUFFIX}",):
                path.unlink(missing_ok=True)
            _delete_indexes_if_exist(directory, base, CLEANED_FILE_SUFFIX)
            cleaned = open_segment(
                directory, base, config, time, file_suffix=CLEANED_FILE_SUFFIX, preallocate=False
            )
            new_segments.append(cleaned)
            appended = cleaned.append_from_file(source, position)
            if appended <= 0:
                raise KafkaError(f"failed to append records from position {position} in {segment}")
            position += appended
        if sum(s.size for s in new_segments) != source.size_in_bytes:
            raise KafkaError(f"inconsistent segment sizes after split of {segment}")
        for s in new_segments:
            s.on_become_inactive_segment()
            s.flush()
            s.set_last_modified(segment.last_modified)
    except BaseException:
        for s in new_segments:
            s.delete_if_exists()
        raise
    replace_segments(existing, new_segments, [segment], directory, scheduler, config, prefix)
    return new_segments
