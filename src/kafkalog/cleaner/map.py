"""Building the cleaner's offset map from a chunk of segment bytes (Kafka's ``buildOffsetMapForSegment``).

For every record at or after the round's first dirty offset that has a key, the map gets ``key digest ->
offset``, in offset order, while it holds fewer than ``slots * load factor`` keys; then the chunk walk stops
and the map is *full* (its latest offset is the last record put). Control batches and batches of aborted
transactions add no key (they feed the transaction state instead) but, like every other batch at or after
the first dirty offset, move the map's latest offset to their last offset. Batches are CRC-checked first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kafkalog.cleaner.filter import control_type, raise_record_error, scratch_arrays
from kafkalog.cleaner.kernels import (
    MS_ENTRIES,
    MS_ERR,
    MS_ERR_POS,
    MS_FULL,
    MS_GROW,
    MS_GROW_AT,
    MS_LATEST,
    MS_MAX,
    MS_NEXT,
    MS_READ,
    N_MAP_STATE,
    map_batches,
)
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.errors import CorruptRecordError
from kafkalog.records import RecordBatch, read_batch_at
from kafkalog.records.compression import decompress
from kafkalog.records.framing import RECORD_BATCH_OVERHEAD
from kafkalog.records.kernels import (
    ERR_LEGACY_MAGIC,
    ERROR_MESSAGES,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_POS,
    F_PRODUCER_ID,
    F_RECORD_COUNT,
    F_SIZE,
    OK,
    SCAN_END,
    SCAN_MORE,
    SCAN_PARTIAL,
    as_uint8,
    scan_batches,
    verify_crcs,
)

__all__ = ["MapProgress", "map_chunk"]

_ATTR_CODEC: Final = 0x07
_ATTR_TXN: Final = 0x10
_ATTR_CONTROL: Final = 0x20


@dataclass
class MapProgress:
    """What :func:`map_chunk` did: bytes of complete batches walked, records read, and whether the map filled."""

    bytes_read: int = 0
    messages_read: int = 0
    full: bool = False


def _as_array(values: list[int]) -> npt.NDArray[np.int64]:
    return np.array(values, np.int64)


def _map_run(
    buf: npt.NDArray[np.uint8],
    starts: list[int],
    ends: list[int],
    counts: list[int],
    bases: list[int],
    lasts: list[int],
    start_offset: int,
    offset_map: SkimpyOffsetMap,
    max_entries: int,
    progress: MapProgress,
    origin: int,
) -> bool:
    """One compiled pass over a run of batches (resumed after each growth of the map's table); returns
    whether the map filled up."""
    if not starts:
        return False
    arrays = [_as_array(starts), _as_array(ends), _as_array(counts), _as_array(bases), _as_array(lasts)]
    scratch, hashes = scratch_arrays().records_for(max(int(arrays[2].max()), 1))
    unset = -(2**63)
    while True:
        state = np.zeros(N_MAP_STATE, np.int64)
        state[MS_ENTRIES] = offset_map.size
        state[MS_MAX] = max_entries
        state[MS_LATEST] = unset
        state[MS_GROW_AT] = offset_map.grow_limit()
        starts_a, ends_a, counts_a, bases_a, lasts_a = arrays
        map_batches(
            buf,
            starts_a,
            ends_a,
            counts_a,
            bases_a,
            lasts_a,
            start_offset,
            offset_map.table(),
            scratch,
            hashes,
            state,
        )
        latest = int(state[MS_LATEST])
        offset_map.add_entries(int(state[MS_ENTRIES]) - offset_map.size, None if latest == unset else latest)
        progress.messages_read += int(state[MS_READ])
        if state[MS_ERR] != OK:
            raise_record_error(int(state[MS_ERR]), int(state[MS_ERR_POS]), origin)
        if not state[MS_GROW]:
            return bool(state[MS_FULL])
        resume = int(state[MS_NEXT])
        offset_map.ensure_room(int(arrays[2][resume]))
        arrays = [a[resume:] for a in arrays]


def map_chunk(
    chunk: bytes,
    start_offset: int,
    offset_map: SkimpyOffsetMap,
    max_entries: int,
    txn: CleanedTransactionMetadata,
    origin: int = 0,
    max_decompressed_bytes: int = 256 * 1024 * 1024,
) -> MapProgress:
    """Add the keys of the complete batches at the start of ``chunk`` to ``offset_map`` (Kafka's
    ``buildOffsetMapForSegment`` for one read buffer): aborted transactional batches and control batches are
    skipped (control batches feed ``txn``); the latest offset moves to each batch's last offset; stops when
    the map holds ``max_entries`` keys (``full``)."""
    progress = MapProgress()
    buf = as_uint8(chunk)
    table = scratch_arrays().table
    view = memoryview(chunk)
    pos, end = 0, len(chunk)
    while pos < end:
        scan = scan_batches(buf, pos, end, table=table)
        n = scan.n
        if n:
            t = scan.table
            bad, _ = verify_crcs(buf, t, n)
            if bad >= 0:
                raise CorruptRecordError(
                    "record batch is corrupt (CRC mismatch) in a segment being cleaned",
                    position=origin + int(t[F_POS, bad]),
                )
            if _map_v2(
                chunk,
                view,
                buf,
                t,
                n,
                start_offset,
                offset_map,
                max_entries,
                txn,
                progress,
                origin,
                max_decompressed_bytes,
            ):
                progress.full = True
                return progress
        if scan.code == ERR_LEGACY_MAGIC:
            batch = read_batch_at(view, scan.next_pos, end, origin)
            if batch is None:
                break
            batch.ensure_valid()
            if _map_legacy(batch, start_offset, offset_map, max_entries, progress, max_decompressed_bytes):
                progress.full = True
                return progress
            pos = scan.next_pos + batch.size_in_bytes
            progress.bytes_read = pos
            continue
        progress.bytes_read = scan.next_pos
        if scan.code == SCAN_MORE:
            pos = scan.next_pos
            continue
        if scan.code in (SCAN_END, SCAN_PARTIAL):
            break
        raise CorruptRecordError(
            ERROR_MESSAGES.get(scan.code, "corrupt batch"), position=origin + scan.next_pos
        )
    return progress


def _map_v2(
    chunk: bytes,
    view: memoryview,
    buf: npt.NDArray[np.uint8],
    t: npt.NDArray[np.int64],
    n: int,
    start_offset: int,
    offset_map: SkimpyOffsetMap,
    max_entries: int,
    txn: CleanedTransactionMetadata,
    progress: MapProgress,
    origin: int,
    max_decompressed_bytes: int,
) -> bool:
    attrs = t[F_ATTRIBUTES, :n]
    pos = t[F_POS, :n]
    size = t[F_SIZE, :n]
    bases = t[F_BASE_OFFSET, :n]
    lasts = bases + t[F_LAST_OFFSET_DELTA, :n]
    counts = t[F_RECORD_COUNT, :n]
    special = (attrs & (_ATTR_TXN | _ATTR_CONTROL | _ATTR_CODEC)) != 0
    if not special.any():
        full = _map_run(
            buf,
            (pos + RECORD_BATCH_OVERHEAD).tolist(),
            (pos + size).tolist(),
            counts.tolist(),
            bases.tolist(),
            lasts.tolist(),
            start_offset,
            offset_map,
            max_entries,
            progress,
            origin,
        )
        txn.consume_up_to(int(lasts[-1]))
        return full
    run: tuple[list[int], list[int], list[int], list[int], list[int]] = ([], [], [], [], [])

    def flush() -> bool:
        full = _map_run(buf, *run, start_offset, offset_map, max_entries, progress, origin)
        for part in run:
            part.clear()
        return full

    for i in range(n):
        a = int(attrs[i])
        lo = int(lasts[i])
        pid = int(t[F_PRODUCER_ID, i])
        if a & _ATTR_CONTROL:
            if flush():
                return True
            batch = read_batch_at(view, int(pos[i]), origin=origin)
            assert batch is not None
            txn.on_control_batch_read(pid, lo, control_type(batch))
            progress.messages_read += 1
            if lo >= start_offset:
                offset_map.update_latest_offset(lo)
            continue
        if txn.on_batch_read(pid, lo, bool(a & _ATTR_TXN)):
            if flush():
                return True
            progress.messages_read += max(int(counts[i]), 0)
            if lo >= start_offset:
                offset_map.update_latest_offset(lo)
            continue
        if a & _ATTR_CODEC:
            if flush():
                return True
            p, s = int(pos[i]), int(size[i])
            payload = decompress(
                a & _ATTR_CODEC,
                view[p + RECORD_BATCH_OVERHEAD : p + s],
                max_decompressed_bytes,
                position=origin + p,
            )
            if _map_run(
                as_uint8(payload),
                [0],
                [len(payload)],
                [int(counts[i])],
                [int(bases[i])],
                [lo],
                start_offset,
                offset_map,
                max_entries,
                progress,
                origin + p,
            ):
                return True
            continue
        for part, value in zip(
            run,
            (int(pos[i]) + RECORD_BATCH_OVERHEAD, int(pos[i] + size[i]), int(counts[i]), int(bases[i]), lo),
            strict=True,
        ):
            part.append(value)
    return flush()


def _map_legacy(
    batch: RecordBatch,
    start_offset: int,
    offset_map: SkimpyOffsetMap,
    max_entries: int,
    progress: MapProgress,
    max_decompressed_bytes: int,
) -> bool:
    for record in batch.records(max_decompressed_bytes):
        if record.key is not None and record.offset >= start_offset:
            if offset_map.size >= max_entries:
                return True
            offset_map.put(record.key, record.offset)
        progress.messages_read += 1
    if batch.last_offset >= start_offset:
        offset_map.update_latest_offset(batch.last_offset)
    return False
