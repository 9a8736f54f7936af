"""Columnar decode of Kafka RecordBatch v2 bytes into Arrow, for the Spark reader.

Input is a buffer of concatenated batches, exactly the bytes of a ``.log`` segment or a slice of one that
starts at a batch boundary (``bytes``, ``bytearray``, ``memoryview``, ``mmap`` or a ``np.uint8`` array; it is
viewed, never copied). Output rows follow Spark's Kafka source (:data:`SCHEMA`):

==============  ========================================  ==================================================
column          Arrow type                                value
==============  ========================================  ==================================================
offset          int64                                     baseOffset + offsetDelta
timestamp       int64 (ms since the epoch)                baseTimestamp + timestampDelta; for LogAppendTime
                                                          batches the batch maxTimestamp for every record
timestampType   int32                                     0 CreateTime, 1 LogAppendTime (attribute bit 3)
key             binary                                    null for a null key (length -1)
value           binary                                    null for a tombstone (length -1)
headers         list<struct<key: string, value: binary>>  null when the record has no headers (Spark's
                                                          convention); only with ``include_headers``
==============  ========================================  ==================================================

All fields are nullable, as in Spark's Kafka source schema: Spark compares nested nullability when it checks
the first Arrow batch, so the header ``key`` field is declared nullable although it never holds a null.
Header keys that are not valid UTF-8 are decoded with U+FFFD replacement, as Kafka's ``Utils.utf8`` does.

Rules, as Kafka's readers apply them:

* Framing (``FileLogInputStream``): a trailing partial batch (fewer than 17 bytes, or a batch that extends past
  the end) ends the input cleanly unless ``allow_partial_tail=False``; ``batchLength < 14``, a v2 size < 61 or
  an unknown magic raise :class:`~kafkalog.errors.CorruptRecordError`; legacy magic 0/1 batches raise
  :class:`~kafkalog.errors.UnsupportedForMessageFormatError` (this decoder reads v2 only).
* ``verify_crc``: CRC-32C over ``[pos + 21, pos + size)`` of every batch that is read (control batches
  included); a mismatch raises ``CorruptRecordError("batch CRC mismatch: stored 0x.. computed 0x..")``.
* Offsets: records outside ``[start_offset, end_offset)`` are dropped. Batches whose last offset is below
  ``start_offset`` are skipped unread (a read starts at the batch containing ``start_offset``) and the scan
  stops at the first batch whose base offset is ``>= end_offset`` (offsets increase in a log).
* Control batches (attribute bit 5) are skipped, as Spark's Kafka source never shows them.
* Compressed batches (codec 1 gzip, 2 snappy (xerial framing or raw), 3 lz4, 4 zstd) are decompressed by
  :func:`kafkalog.records.compression.decompress` with at most ``max_decompressed_bytes`` bytes per batch
  (:class:`~kafkalog.errors.DecompressionBombError` past it, :class:`~kafkalog.errors.RecordDecompressionError`
  for a broken payload, :class:`~kafkalog.errors.UnsupportedCompressionTypeError` for codec ids 5-7) and their
  records are indexed like uncompressed ones.
* Record structure errors raise :class:`~kafkalog.errors.InvalidRecordError` with the byte position (see
  :mod:`kafkalog.records._kernels` for the exact rules).

Memory: output buffers come from a :class:`BufferPool`. Ownership of each buffer passes to Arrow (through
``pa.py_buffer`` of a NumPy view); when Arrow releases the last reference, a finalizer returns the memory to
the pool, so memory is reused only once no Arrow data refers to it. A first-touch page fault costs far more
than writing into a page already mapped, so reusing pages is what makes the pooled decode faster than
allocating fresh output memory on every call when a consumer processes and drops batches one at a time
(``bench/bench_columnar.py`` measures it; docs/benchmarks.md, "Design measurements"). Buffers are sized by
upper bounds that need no parsing (key, value and header data each at most the records' bytes; at most one
header per 2 bytes); only the pages actually written become resident.

The hot loop is a numba kernel (compiled once and cached on disk where :mod:`kafkalog.jit` chooses,
``NUMBA_CACHE_DIR`` or a per-user directory, never inside the package). Kernels release the GIL, so threads decode different buffers in parallel.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafkalog.errors import CorruptRecordError, InvalidRecordError, UnsupportedForMessageFormatError
from kafkalog.records import _kernels as K
from kafkalog.records import _kernels_columnar as KC
from kafkalog.records._kernels_columnar import _decode_columns
from kafkalog.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from kafkalog.records.framing import MAGIC_OFFSET
from kafkalog.records.utf8 import decode_utf8_as_java

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_TARGET_BYTES",
    "DEFAULT_TARGET_ROWS",
    "HEADERS_TYPE",
    "HEADER_STRUCT_TYPE",
    "SCHEMA",
    "SCHEMA_WITHOUT_HEADERS",
    "BufferPool",
    "decode_columnar",
    "default_pool",
    "iter_columnar",
]

HEADER_STRUCT_TYPE: Final = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE: Final = pa.list_(HEADER_STRUCT_TYPE)
SCHEMA_WITHOUT_HEADERS: Final = pa.schema(
    [
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("timestampType", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
    ]
)
SCHEMA: Final = SCHEMA_WITHOUT_HEADERS.append(pa.field("headers", HEADERS_TYPE))

DEFAULT_TARGET_ROWS: Final = 65536
DEFAULT_TARGET_BYTES: Final = 16 << 20

_INT32_MAX: Final = (1 << 31) - 1
_INT64_MAX: Final = (1 << 63) - 1
_INT64_MIN: Final = -(1 << 63)
_SCAN_BATCHES: Final = 65536  # scan-table columns per round

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]


# --- buffer pool --------------------------------------------------------------------------------------------


class BufferPool:
    """Reusable ``np.uint8`` buffers whose memory is recycled only after Arrow has released it.

    :meth:`take` hands out a lease: a new array over a pooled (or new) buffer. Whoever holds the lease, or
    any view of it, owns the memory; when the lease and every view derived from it are garbage collected
    (for views wrapped by ``pa.py_buffer``: when no Arrow buffer refers to them any more), a
    ``weakref.finalize`` hook returns the buffer to the free list. The pool never hands out memory that a
    live view references, so Arrow data can never be overwritten.

    Free buffers are kept up to ``max_free_bytes`` in total; requests below ``min_pooled_bytes`` are served
    by plain ``np.empty`` (malloc reuses small blocks cheaply). Capacities are rounded up to powers of two so
    buffers fit later requests. Thread-safe.
    """

    def __init__(self, *, max_free_bytes: int = 512 << 20, min_pooled_bytes: int = 64 << 10) -> None:
        self._free: list[U8Array] = []
        self._free_bytes = 0
        self._lock = threading.Lock()
        self.max_free_bytes = max_free_bytes
        self.min_pooled_bytes = min_pooled_bytes
        self.hits = 0
        self.misses = 0

    def take(self, nbytes: int) -> U8Array:
        """A writable uint8 view of exactly ``nbytes`` bytes (contents undefined)."""
        if nbytes < self.min_pooled_bytes or nbytes == 0:
            return np.empty(nbytes, np.uint8)
        found: U8Array | None = None
        with self._lock:
            best = -1
            for i, buf in enumerate(self._free):
                if buf.shape[0] >= nbytes and (best < 0 or buf.shape[0] < self._free[best].shape[0]):
                    best = i
            if best >= 0:
                found = self._free.pop(best)
                self._free_bytes -= found.shape[0]
                self.hits += 1
            else:
                self.misses += 1
        if found is None:
            found = np.empty(1 << (nbytes - 1).bit_length(), np.uint8)
        # The lease is a new array whose base is a memoryview, not a slice of ``found``: NumPy collapses the
        # base of every view to the array that owns the memory, so a slice's finalizer would run while
        # views derived from it (and handed to Arrow) still reference ``found``. Views of the lease keep
        # the lease itself alive, so its finalizer runs only after the last of them is gone.
        lease = np.frombuffer(found.data, np.uint8, count=nbytes)
        weakref.finalize(lease, self._give_back, found)
        return lease

    def _give_back(self, buf: U8Array) -> None:
        with self._lock:
            if self._free_bytes + buf.shape[0] <= self.max_free_bytes:
                self._free.append(buf)
                self._free_bytes += buf.shape[0]

    def clear(self) -> None:
        """Drop every free buffer (buffers in use return later as usual)."""
        with self._lock:
            self._free.clear()
            self._free_bytes = 0

    @property
    def free_bytes(self) -> int:
        """Bytes held in free buffers."""
        return self._free_bytes


_DEFAULT_POOL = BufferPool()


def default_pool() -> BufferPool:
    """The process-wide pool used when no ``pool`` is passed."""
    return _DEFAULT_POOL


def _alloc(pool: BufferPool | None, nbytes: int) -> U8Array:
    return np.empty(nbytes, np.uint8) if pool is None else pool.take(nbytes)


# --- planning and decoding one group of batches -------------------------------------------------------------


def _raise_scan_error(code: int, pos: int, buf: U8Array) -> None:
    if code == K.ERR_LEGACY_MAGIC:
        magic = int(buf[pos + MAGIC_OFFSET])
        raise UnsupportedForMessageFormatError(
            f"legacy message format (magic {magic}): the columnar decoder reads only RecordBatch v2",
            position=pos,
        )
    message = K.ERROR_MESSAGES.get(code, f"error code {code}")
    if code == K.ERR_BAD_MAGIC:
        message = f"{message} {int(buf[pos + MAGIC_OFFSET].view(np.int8))}"
    raise CorruptRecordError(message, position=pos)


def _check_crcs(buf: U8Array, table: I64Array, n: int) -> None:
    bad, computed = K.verify_crcs(buf, table, n)
    if bad >= 0:
        raise CorruptRecordError(
            f"batch CRC mismatch: stored 0x{int(table[K.F_CRC, bad]):08x} computed 0x{int(computed[bad]):08x}",
            position=int(table[K.F_POS, bad]),
        )


class _Group:
    """Plan of the data batches of one scan round (records in ``buf``, or in ``dbuf`` once decompressed)."""

    __slots__ = ("dbuf", "plan", "records_bytes")

    def __init__(self, plan: I64Array, dbuf: U8Array) -> None:
        self.plan = plan
        self.dbuf = dbuf
        self.records_bytes = plan[KC.P_END] - plan[KC.P_START]


_EMPTY_U8: Final[U8Array] = K.as_uint8(bytes(1))


def _plan_group(
    buf: U8Array, table: I64Array, n: int, verify_crc: bool, max_decompressed_bytes: int
) -> _Group:
    """Build the kernel plan for batches ``table[:, :n]``: drop control batches and decompress.

    CRCs of uncompressed data batches are verified inside the kernel, batch by batch while the bytes are in
    cache; control and compressed batches (and every batch without the native CRC) are verified here first,
    so nothing is decompressed before its CRC has been checked.
    """
    t = table[:, :n]
    attributes = t[K.F_ATTRIBUTES]
    control = (attributes & K.ATTR_CONTROL) != 0
    codecs = attributes & K.ATTR_CODEC_MASK
    crc_in_kernel = verify_crc and K.NATIVE_CRC
    if verify_crc:
        early = np.flatnonzero(control | (codecs != 0)) if crc_in_kernel else np.arange(n)
        if early.shape[0]:
            _check_crcs(buf, np.ascontiguousarray(t[:, early]), early.shape[0])
    if control.any():
        data_cols = np.flatnonzero(~control)
        t = t[:, data_cols]
        codecs = codecs[data_cols]
    nb = t.shape[1]
    plan = np.empty((KC.N_PLAN_FIELDS, nb), np.int64)
    plan[KC.P_SRC] = 0
    plan[KC.P_START] = t[K.F_POS] + K.BATCH_HEADER_SIZE
    plan[KC.P_END] = t[K.F_POS] + t[K.F_SIZE]
    plan[KC.P_COUNT] = t[K.F_RECORD_COUNT]
    plan[KC.P_BASE_OFFSET] = t[K.F_BASE_OFFSET]
    plan[KC.P_BASE_TIMESTAMP] = t[K.F_BASE_TIMESTAMP]
    plan[KC.P_MAX_TIMESTAMP] = t[K.F_MAX_TIMESTAMP]
    plan[KC.P_ATTRIBUTES] = t[K.F_ATTRIBUTES]
    plan[KC.P_BATCH_POS] = t[K.F_POS]
    plan[KC.P_BATCH_SIZE] = t[K.F_SIZE]
    plan[KC.P_STORED_CRC] = t[K.F_CRC]
    plan[KC.P_CHECK_CRC] = (codecs == 0) if crc_in_kernel else 0
    dbuf = _EMPTY_U8
    compressed = np.flatnonzero(codecs != 0)
    if compressed.shape[0]:
        dbuf = _decompress_batches(buf, plan, compressed, max_decompressed_bytes)
    return _Group(plan, dbuf)


def _decompress_batches(buf: U8Array, plan: I64Array, cols: npt.NDArray[np.intp], max_bytes: int) -> U8Array:
    """Decompress the records of plan columns ``cols`` into one buffer and point the plan at it."""
    mv = buf.data
    parts: list[bytes | bytearray] = []
    at = 0
    for col in cols.tolist():
        pos = int(plan[KC.P_BATCH_POS, col])
        codec = int(plan[KC.P_ATTRIBUTES, col]) & K.ATTR_CODEC_MASK
        payload = mv[int(plan[KC.P_START, col]) : int(plan[KC.P_END, col])]
        out = decompress(codec, payload, max_bytes, position=pos)
        parts.append(out)
        plan[KC.P_SRC, col] = 1
        plan[KC.P_START, col] = at
        at += len(out)
        plan[KC.P_END, col] = at
    return K.as_uint8(b"".join(parts)) if at else _EMPTY_U8


def _bitmap_buffer(bits: U8Array, n: int, nulls: int) -> pa.Buffer | None:
    return None if nulls == 0 else pa.py_buffer(bits[: (n + 7) >> 3])


def _binary_array(
    typ: pa.DataType, n: int, valid: U8Array, offsets: U8Array, data: U8Array, nbytes: int, nulls: int
) -> pa.Array:
    return pa.Array.from_buffers(
        typ,
        n,
        [_bitmap_buffer(valid, n, nulls), pa.py_buffer(offsets[: 4 * (n + 1)]), pa.py_buffer(data[:nbytes])],
        null_count=nulls,
    )


def _header_keys(n: int, offsets: U8Array, data: U8Array, nbytes: int) -> pa.Array:
    keys = _binary_array(pa.string(), n, _EMPTY_U8, offsets, data, nbytes, 0)
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:  # invalid UTF-8: decode as Kafka does (replacement characters)
        raw = _binary_array(pa.binary(), n, _EMPTY_U8, offsets, data, nbytes, 0)
        keys = pa.array([decode_utf8_as_java(b) for b in raw.to_pylist()], pa.string())
    return keys


def _decode_group(
    buf: U8Array,
    group: _Group,
    cols: slice,
    start_offset: int,
    end_offset: int,
    include_headers: bool,
    pool: BufferPool | None,
) -> pa.RecordBatch:
    """Run the fused kernel over plan columns ``cols`` and wrap its buffers as an Arrow RecordBatch."""
    plan = np.ascontiguousarray(group.plan[:, cols])
    nb = plan.shape[1]
    records_bytes = group.records_bytes[cols]
    # A record takes at least 7 bytes, so a larger declared count is a lie the kernel reports (after the
    # batch's CRC): size the row buffers by what the bytes can hold, never by the declared count.
    rows = int(np.clip(plan[KC.P_COUNT], 0, records_bytes // K.MIN_RECORD_SIZE).sum())
    nbytes = int(records_bytes.sum())
    bits = (rows + 7) >> 3
    out_offset = _alloc(pool, 8 * rows)
    out_ts = _alloc(pool, 8 * rows)
    out_type = _alloc(pool, 4 * rows)
    key_valid = _alloc(pool, bits)
    key_offsets = _alloc(pool, 4 * (rows + 1))
    key_data = _alloc(pool, nbytes)
    value_valid = _alloc(pool, bits)
    value_offsets = _alloc(pool, 4 * (rows + 1))
    value_data = _alloc(pool, nbytes)
    if include_headers:
        # a header takes at least 2 bytes and a record without headers at least 7
        max_headers = max(0, (nbytes - K.MIN_RECORD_SIZE * rows) // 2)
        hl_valid = _alloc(pool, bits)
        hl_offsets = _alloc(pool, 4 * (rows + 1))
        hk_offsets = _alloc(pool, 4 * (max_headers + 1))
        hk_data = _alloc(pool, nbytes)
        hv_valid = _alloc(pool, (max_headers + 7) >> 3)
        hv_offsets = _alloc(pool, 4 * (max_headers + 1))
        hv_data = _alloc(pool, nbytes)
    else:
        hl_valid = hk_data = hv_valid = hv_data = np.zeros(1, np.uint8)  # never written
        hl_offsets = hk_offsets = hv_offsets = np.zeros(4, np.uint8)  # only [0] = 0 is written
    stats = np.zeros(KC.N_STATS, np.int64)
    err = _decode_columns(
        buf,
        group.dbuf,
        plan,
        nb,
        start_offset,
        end_offset,
        include_headers,
        out_offset.view(np.int64),
        out_ts.view(np.int64),
        out_type.view(np.int32),
        key_valid,
        key_offsets.view(np.int32),
        key_data,
        value_valid,
        value_offsets.view(np.int32),
        value_data,
        hl_valid,
        hl_offsets.view(np.int32),
        hk_offsets.view(np.int32),
        hk_data,
        hv_valid,
        hv_offsets.view(np.int32),
        hv_data,
        stats,
    )
    if err != K.OK:
        _raise_record_error(int(err), plan, stats)
    n = int(stats[KC.S_ROWS])
    arrays = [
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(out_offset[: 8 * n])]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(out_ts[: 8 * n])]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(out_type[: 4 * n])]),
        _binary_array(
            pa.binary(),
            n,
            key_valid,
            key_offsets,
            key_data,
            int(stats[KC.S_KEY_BYTES]),
            int(stats[KC.S_KEY_NULLS]),
        ),
        _binary_array(
            pa.binary(),
            n,
            value_valid,
            value_offsets,
            value_data,
            int(stats[KC.S_VALUE_BYTES]),
            int(stats[KC.S_VALUE_NULLS]),
        ),
    ]
    if not include_headers:
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA_WITHOUT_HEADERS)
    nh = int(stats[KC.S_HEADERS])
    keys = _header_keys(nh, hk_offsets, hk_data, int(stats[KC.S_HKEY_BYTES]))
    values = _binary_array(
        pa.binary(),
        nh,
        hv_valid,
        hv_offsets,
        hv_data,
        int(stats[KC.S_HVALUE_BYTES]),
        int(stats[KC.S_HVALUE_NULLS]),
    )
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_STRUCT_TYPE))
    hl_nulls = int(stats[KC.S_HLIST_NULLS])
    headers = pa.Array.from_buffers(
        HEADERS_TYPE,
        n,
        [_bitmap_buffer(hl_valid, n, hl_nulls), pa.py_buffer(hl_offsets[: 4 * (n + 1)])],
        null_count=hl_nulls,
        children=[structs],
    )
    arrays.append(headers)
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _raise_record_error(err: int, plan: I64Array, stats: I64Array) -> None:
    col = int(stats[KC.S_ERR_BATCH])
    batch_pos = int(plan[KC.P_BATCH_POS, col])
    err_pos = int(stats[KC.S_ERR_POS])
    if err == K.ERR_CRC:
        raise CorruptRecordError(
            f"batch CRC mismatch: stored 0x{int(plan[KC.P_STORED_CRC, col]):08x} "
            f"computed 0x{int(stats[KC.S_CRC_COMPUTED]):08x}",
            position=batch_pos,
        )
    message = K.ERROR_MESSAGES.get(err, f"error code {err}")
    if plan[KC.P_SRC, col] != 0:
        rel = err_pos - int(plan[KC.P_START, col])
        raise InvalidRecordError(
            f"{message} (at byte {rel} of the decompressed records of the batch)", position=batch_pos
        )
    raise InvalidRecordError(f"{message} (in the batch at position {batch_pos})", position=err_pos)


def _scan_table(buf: U8Array, max_batches: int) -> I64Array:
    """A scan table with room for ``max_batches`` batches, or for as many as ``buf`` can hold if fewer."""
    cols = max(1, min(max_batches, buf.shape[0] // K.BATCH_HEADER_SIZE + 1))
    return np.empty((K.N_BATCH_FIELDS, cols), np.int64)


def _split_columns(group: _Group, max_bytes: int) -> list[slice]:
    """Split plan columns so each part's records bytes stay within ``max_bytes`` (at least one batch each)."""
    sizes = group.records_bytes
    n = sizes.shape[0]
    if n == 0 or int(sizes.sum()) <= max_bytes:
        return [slice(0, n)]
    ends = np.cumsum(sizes)
    parts: list[slice] = []
    start = 0
    while start < n:
        base = int(ends[start - 1]) if start else 0
        stop = max(int(np.searchsorted(ends, base + max_bytes, side="right")), start + 1)
        parts.append(slice(start, stop))
        start = stop
    return parts


# --- public API -------------------------------------------------------------------------------------------


def _bounds(start_offset: int | None, end_offset: int | None) -> tuple[int, int]:
    lo = _INT64_MIN if start_offset is None else start_offset
    hi = _INT64_MAX if end_offset is None else end_offset
    return lo, hi


def iter_columnar(
    data: Any,
    *,
    include_headers: bool = True,
    verify_crc: bool = True,
    start_offset: int | None = None,
    end_offset: int | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    target_rows: int = DEFAULT_TARGET_ROWS,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    allow_partial_tail: bool = True,
    pool: BufferPool | None = _DEFAULT_POOL,
) -> Iterator[pa.RecordBatch]:
    """Decode ``data`` lazily into RecordBatches of whole Kafka batches (see the module docstring).

    Each RecordBatch covers consecutive Kafka batches holding about ``target_rows`` declared records or
    ``target_bytes`` bytes of (decompressed) records; it exceeds the targets by at most one Kafka batch.
    Batches without rows after filtering are not yielded. An error is raised once the RecordBatches before
    the bad Kafka batch have been yielded, so a consumer sees a correct prefix first. Memory stays bounded
    when the consumer drops each RecordBatch before asking for the next (buffers are then reused).
    """
    if target_rows <= 0 or target_bytes <= 0:
        raise ValueError("target_rows and target_bytes must be positive")
    buf = K.as_uint8(data)
    lo, hi = _bounds(start_offset, end_offset)
    out_bytes = min(target_bytes, _INT32_MAX)
    table = _scan_table(buf, min(_SCAN_BATCHES, max(64, target_rows)))
    pos = 0
    end = buf.shape[0]
    while True:
        scan = K.scan_batches(
            buf,
            pos,
            end,
            max_records=target_rows,
            max_bytes=target_bytes,
            skip_below=lo,
            stop_offset=hi,
            table=table,
        )
        if scan.n:
            group = _plan_group(buf, scan.table, scan.n, verify_crc, max_decompressed_bytes)
            if group.plan.shape[1]:
                for cols in _split_columns(group, out_bytes):
                    batch = _decode_group(buf, group, cols, lo, hi, include_headers, pool)
                    if batch.num_rows:
                        yield batch
                    del batch
        pos = scan.next_pos
        if scan.code != K.SCAN_MORE:
            _finish_scan(scan.code, pos, buf, allow_partial_tail)
            return


def decode_columnar(
    data: Any,
    *,
    include_headers: bool = True,
    verify_crc: bool = True,
    start_offset: int | None = None,
    end_offset: int | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    allow_partial_tail: bool = True,
    pool: BufferPool | None = _DEFAULT_POOL,
) -> pa.RecordBatch:
    """Decode all records of ``data`` into one Arrow RecordBatch with schema :data:`SCHEMA` (or
    :data:`SCHEMA_WITHOUT_HEADERS` when ``include_headers`` is false); rules and errors are in the module
    docstring. Errors are raised for the first problem in byte order; nothing is returned on error.

    Raises ``ValueError`` when the records exceed 2 GiB (Arrow's int32 binary offsets; one segment always
    fits); stream larger inputs with :func:`iter_columnar`.
    """
    buf = K.as_uint8(data)
    lo, hi = _bounds(start_offset, end_offset)
    tables: list[I64Array] = []
    table = _scan_table(buf, _SCAN_BATCHES)
    pos = 0
    while True:
        scan = K.scan_batches(buf, pos, buf.shape[0], skip_below=lo, stop_offset=hi, table=table)
        tables.append(scan.table[:, : scan.n].copy())
        pos = scan.next_pos
        if scan.code != K.SCAN_MORE:
            break
    table = np.ascontiguousarray(tables[0] if len(tables) == 1 else np.concatenate(tables, axis=1))
    batch = _empty_batch(include_headers)
    if table.shape[1]:
        group = _plan_group(buf, table, table.shape[1], verify_crc, max_decompressed_bytes)
        if int(group.records_bytes.sum()) > _INT32_MAX:
            raise ValueError("records exceed 2 GiB, the limit of one Arrow binary array: use iter_columnar")
        if group.plan.shape[1]:
            batch = _decode_group(buf, group, slice(0, group.plan.shape[1]), lo, hi, include_headers, pool)
    _finish_scan(scan.code, pos, buf, allow_partial_tail)
    return batch


def _finish_scan(code: int, pos: int, buf: U8Array, allow_partial_tail: bool) -> None:
    """Raise for the scan's final stop reason if it is an error (or a forbidden partial tail)."""
    if code == K.SCAN_PARTIAL and not allow_partial_tail:
        raise CorruptRecordError(f"truncated batch: {buf.shape[0] - pos} trailing bytes", position=pos)
    if code >= K.ERR_FRAME_SIZE:
        _raise_scan_error(code, pos, buf)


def _empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = SCHEMA if include_headers else SCHEMA_WITHOUT_HEADERS
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
