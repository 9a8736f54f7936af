"""Writing RecordBatch v2: :class:`MemoryRecordsBuilder`, byte for byte what Kafka's builder writes.

Rules mirrored from ``MemoryRecordsBuilder`` / ``DefaultRecord.writeTo``:

* ``baseTimestamp`` is the first record's timestamp (or the delete horizon when one is set); record
  timestamp deltas are relative to it. ``maxTimestamp`` is the largest record timestamp, or the log
  append time for ``LogAppendTime`` batches.
* Offsets must increase; ``lastOffsetDelta`` is ``last offset - base offset`` (gaps are allowed).
* A negative timestamp other than -1 is rejected; header keys must not be null.
* An idempotent batch needs a producer epoch and a non-negative base sequence (except control batches);
  a transactional batch needs a producer id.
* No records: the result is :attr:`MemoryRecords.EMPTY`.
* The CRC-32C covers the attributes to the end; the partition leader epoch is outside it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from crc32c import crc32c

from kafkalog.records._encode import encode_records
from kafkalog.records.batch import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
)
from kafkalog.records.compression import Compression, compress
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.framing import ATTRIBUTES_OFFSET, CRC_OFFSET
from kafkalog.records.memory_records import MemoryRecords
from kafkalog.records.record import Header, Record, SimpleRecord, TimestampType

__all__ = ["MemoryRecordsBuilder"]


class MemoryRecordsBuilder:
    """Accumulates records and builds one magic-2 batch (Kafka's ``MemoryRecordsBuilder``)."""

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: Compression = Compression.NONE,
        compression_level: int | None = None,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time: int = -1,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control_batch: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms: int | None = None,
    ) -> None:
        if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("timestamp type must be set for magic 2")
        self.base_offset = base_offset
        self.compression = compression
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control_batch = is_control_batch
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        self._timestamps: list[int] = []
        self._offset_deltas: list[int] = []
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._headers: list[tuple[tuple[str, bytes | None], ...]] = []
        self._has_headers = False
        self._num_records = 0
        self._last_offset: int | None = None
        self._first_timestamp: int | None = delete_horizon_ms
        self._max_timestamp = -1
        self._built: MemoryRecords | None = None

    @property
    def num_records(self) -> int:
        """Records appended so far."""
        return self._num_records

    @property
    def last_offset(self) -> int | None:
        """Offset of the last appended record."""
        return self._last_offset

    def next_sequential_offset(self) -> int:
        """The offset the next :meth:`append` gets."""
        return self.base_offset if self._last_offset is None else self._last_offset + 1

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | Sequence[tuple[str, bytes | None]] = (),
    ) -> None:
        """Append a record at the next sequential offset."""
        self.append_with_offset(self.next_sequential_offset(), timestamp, key, value, headers)

    def append_with_offset(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | Sequence[tuple[str, bytes | None]] = (),
        *,
        _control: bool = False,
    ) -> None:
        """Append a record at ``offset`` (offsets must increase; gaps are allowed, as after compaction)."""
        if self._built is not None:
            raise RuntimeError("the builder is closed")
        if _control != self.is_control_batch:
            raise ValueError("control records can only be appended to control batches")
        if self._last_offset is not None and offset <= self._last_offset:
            raise ValueError(
                f"illegal offset {offset} following previous offset {self._last_offset} "
                "(offsets must increase monotonically)"
            )
        if offset < self.base_offset:
            raise ValueError(f"offset {offset} is below the base offset {self.base_offset}")
        if offset - self.base_offset > 0x7FFFFFFF:
            raise ValueError(f"offset {offset} is too far from the base offset {self.base_offset}")
        if timestamp < 0 and timestamp != -1:
            raise ValueError(f"invalid negative timestamp {timestamp}")
        if self._first_timestamp is None:
            self._first_timestamp = timestamp
        hs = tuple(headers)
        for hkey, _hval in hs:
            if hkey is None:
                raise ValueError("invalid null header key found in headers")
        self._timestamps.append(timestamp)
        self._offset_deltas.append(offset - self.base_offset)
        self._keys.append(key)
        self._values.append(value)
        self._headers.append(hs)
        self._has_headers = self._has_headers or bool(hs)
        self._num_records += 1
        self._last_offset = offset
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp

    def append_many(
        self,
        records: Iterable[SimpleRecord | Record | bytes | tuple[bytes | None, bytes | None]],
        *,
        now_ms: int | None = None,
    ) -> None:
        """Append records at sequential offsets (see :meth:`MemoryRecords.build` for accepted items)."""
        if self._built is not None:
            raise RuntimeError("the builder is closed")
        if self.is_control_batch:
            raise ValueError("control records can only be appended to control batches")
        now = int(time.time() * 1000) if now_ms is None else now_ms
        items = records if isinstance(records, list) else list(records)
        if not items:
            return
        if all(type(r) is SimpleRecord for r in items):
            ts = [now if r.timestamp is None else r.timestamp for r in items]  # type: ignore[union-attr]
            keys = [r.key for r in items]  # type: ignore[union-attr]
            values = [r.value for r in items]  # type: ignore[union-attr]
            headers = [tuple(r.headers) for r in items]  # type: ignore[union-attr]
        else:
            ts, keys, values, headers = [], [], [], []
            for item in items:
                if isinstance(item, (bytes, bytearray, memoryview)):
                    ts.append(now)
                    keys.append(None)
                    values.append(bytes(item))
                    headers.append(())
                elif isinstance(item, (SimpleRecord, Record)):
                    ts.append(now if item.timestamp is None else item.timestamp)
                    keys.append(item.key)
                    values.append(item.value)
                    headers.append(tuple(item.headers))
                else:
                    key, value = item
                    ts.append(now)
                    keys.append(key)
                    values.append(value)
                    headers.append(())
        bad = [t for t in ts if t < -1]
        if bad:
            raise ValueError(f"invalid negative timestamp {bad[0]}")
        start = self.next_sequential_offset()
        if start + len(items) - 1 - self.base_offset > 0x7FFFFFFF:
            raise ValueError(
                f"offset {start + len(items) - 1} is too far from the base offset {self.base_offset}"
            )
        has_headers = any(headers)
        if has_headers:
            for hs in headers:
                for hkey, _hval in hs:
                    if hkey is None:
                        raise ValueError("invalid null header key found in headers")
        if self._first_timestamp is None:
            self._first_timestamp = ts[0]
        rel = start - self.base_offset
        self._timestamps.extend(ts)
        self._offset_deltas.extend(range(rel, rel + len(items)))
        self._keys.extend(keys)
        self._values.extend(values)
        self._headers.extend(headers)
        self._has_headers = self._has_headers or has_headers
        self._num_records += len(items)
        self._last_offset = start + len(items) - 1
        self._max_timestamp = max(self._max_timestamp, max(ts))

    def append_end_txn_marker(self, timestamp: int, marker: EndTransactionMarker) -> None:
        """Append a COMMIT/ABORT control record (the batch must be a transactional control batch)."""
        if self.producer_id == NO_PRODUCER_ID:
            raise ValueError("end transaction marker requires a valid producer id")
        if not self.is_transactional:
            raise ValueError("end transaction marker depends on batch transactional flag being enabled")
        self.append_with_offset(
            self.next_sequential_offset(),
            timestamp,
            marker.control_type.record_key(),
            marker.value_bytes(),
            _control=True,
        )

    def _validate_producer_state(self) -> None:
        if self.is_transactional and self.producer_id == NO_PRODUCER_ID:
            raise ValueError("cannot write transactional messages without a valid producer id")
        if self.producer_id != NO_PRODUCER_ID:
            if self.producer_epoch == NO_PRODUCER_EPOCH:
                raise ValueError("invalid negative producer epoch")
            if self.base_sequence < 0 and not self.is_control_batch:
                raise ValueError("invalid negative sequence number used")

    def build(self) -> MemoryRecords:
        """Close the builder and return the batch (``MemoryRecords.EMPTY`` if no records were appended)."""
        if self._built is not None:
            return self._built
        self._validate_producer_state()
        if self._num_records == 0:
            self._built = MemoryRecords.EMPTY
            return self._built
        first_ts = self._first_timestamp
        assert first_ts is not None
        payload = encode_records(
            [t - first_ts for t in self._timestamps],
            self._offset_deltas,
            self._keys,
            self._values,
            self._headers if self._has_headers else None,
        )
        self._timestamps, self._offset_deltas, self._keys, self._values, self._headers = [], [], [], [], []
        if self.compression is not Compression.NONE:
            payload = compress(self.compression, payload, self.compression_level)
        attributes = int(self.compression)
        if self.timestamp_type is TimestampType.LOG_APPEND_TIME:
            attributes |= ATTR_TIMESTAMP_TYPE
            max_ts = self.log_append_time
        else:
            max_ts = self._max_timestamp
        if self.is_transactional:
            attributes |= ATTR_TRANSACTIONAL
        if self.is_control_batch:
            attributes |= ATTR_CONTROL
        if self.delete_horizon_ms is not None:
            attributes |= ATTR_DELETE_HORIZON
        assert self._last_offset is not None and self._first_timestamp is not None
        size = RECORD_BATCH_OVERHEAD + len(payload)
        buf = bytearray(size)
        HEADER.pack_into(
            buf,
            0,
            self.base_offset,
            size - LOG_OVERHEAD,
            self.partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            self._last_offset - self.base_offset,
            self._first_timestamp,
            max_ts,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._num_records,
        )
        buf[RECORD_BATCH_OVERHEAD:] = payload
        crc = crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:])
        buf[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc.to_bytes(4, "big")
        self._built = MemoryRecords(buf)
        return self._built
