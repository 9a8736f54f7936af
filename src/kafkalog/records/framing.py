"""The framing of a log: where each entry of a buffer of batches ends, and the v2 batch header's layout.

Every ``.log`` file, fetch response and produce request is a concatenation of entries, each
``baseOffset int64 · batchLength int32 · ...`` with the magic byte at offset 16 (``MAGIC_OFFSET``) whatever
the format. This module owns the one rule that frames them, :func:`next_frame`, which every frame walker
in kafkalog calls. Two hot loops keep an inlined copy, each pinned to it by a hypothesis test: the numba
scan (``scan_batches``, ``tests/records/test_framing.py``) and ``FileRecords.search_for_offset_with_size``
(``tests/storage/test_file_records.py``); the read fast path's walk (``storage/segment_read.py``) inlines it
too but only declines, leaving the answer to the offset search. For the entry at ``pos`` of ``buf[:end]`` it says:

* ``HEADER_SIZE_UP_TO_MAGIC`` (17) bytes or fewer left: :data:`PARTIAL_TAIL` (quiet: a walk ends there),
  Kafka's ``FileLogInputStream`` (``position >= end - 17``);
* ``batchLength < 14`` (``RECORD_OVERHEAD_V0``, the smallest entry of any format): a :class:`CorruptFrame`;
* ``LOG_OVERHEAD + batchLength`` past ``end``: :data:`PARTIAL_TAIL` (a fetch cut at max bytes, a crash);
* else the entry's size in bytes (an ``int``, ``LOG_OVERHEAD + batchLength``); :func:`frame_magic` is its
  signed magic. Which format that magic means is Kafka's rule for the reader at hand:

  - a **file** (``FileLogInputStream``; recovery, the loader, ``verify``, ``dump``, a segment's offset
    search): a magic below 2 is a legacy entry, 2 and above a v2 batch (the v2 CRC does not cover the
    magic, and Kafka's recovery keeps such a batch when its size and CRC are good);
  - **bytes in memory** (``ByteBufferLogInputStream``; a produce request, a consumer's fetch, the cleaner's
    read buffer): ``known_magic_only=True``, a magic outside 0..2 is a :class:`CorruptFrame`
    (``invalid magic found in record``), what a Kafka consumer raises for such a batch.

Header layout of a v2 batch (Kafka's ``DefaultRecordBatch`` constants, offsets from the batch's first byte)::

    BASE_OFFSET_OFFSET 0 (int64) · LENGTH_OFFSET 8 (int32) · PARTITION_LEADER_EPOCH_OFFSET 12 (int32)
    · MAGIC_OFFSET 16 (int8) · CRC_OFFSET 17 (uint32) · ATTRIBUTES_OFFSET 21 (int16)
    · LAST_OFFSET_DELTA_OFFSET 23 (int32) · BASE_TIMESTAMP_OFFSET 27 (int64) · MAX_TIMESTAMP_OFFSET 35 (int64)
    · PRODUCER_ID_OFFSET 43 (int64) · PRODUCER_EPOCH_OFFSET 51 (int16) · BASE_SEQUENCE_OFFSET 53 (int32)
    · RECORDS_COUNT_OFFSET 57 (int32) · RECORDS_OFFSET 61 = RECORD_BATCH_OVERHEAD

The CRC-32C covers ``[ATTRIBUTES_OFFSET, end)``. Pure Python: the bottom of ``records`` (imports only
:mod:`kafkalog.errors`).
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from kafkalog.errors import CorruptRecordError

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "CRC_OFFSET",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LAST_OFFSET_DELTA_OFFSET",
    "LENGTH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "PARTIAL_TAIL",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "RECORD_OVERHEAD_V0",
    "SIZE_BELOW_OVERHEAD",
    "UNKNOWN_MAGIC",
    "CorruptFrame",
    "FrameVerdict",
    "PartialTail",
    "frame_magic",
    "is_v2_magic",
    "next_frame",
]

# Kafka's Records: every entry of any magic
BASE_OFFSET_OFFSET: Final = 0  # Records.OFFSET_OFFSET
LENGTH_OFFSET: Final = 8  # Records.SIZE_OFFSET: bytes after this field
LOG_OVERHEAD: Final = 12  # offset + size
MAGIC_OFFSET: Final = 16
HEADER_SIZE_UP_TO_MAGIC: Final = 17
#: Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``: the smallest ``batchLength`` of any format.
RECORD_OVERHEAD_V0: Final = 14

# Kafka's DefaultRecordBatch: the v2 header
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21  # the first byte the CRC covers
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = 61
RECORD_BATCH_OVERHEAD: Final = RECORDS_OFFSET

_MAGIC_V2: Final = 2
_SIZE_UNPACK: Final = struct.Struct(">i").unpack_from


class PartialTail:
    """The bytes left do not hold a complete entry: a walk ends there quietly (a crash, a cut fetch)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PARTIAL_TAIL"


#: The one :class:`PartialTail` value.
PARTIAL_TAIL: Final = PartialTail()


class CorruptFrame(NamedTuple):
    """The entry cannot be framed: ``reason`` is Kafka's message, ``code`` the record kernels' error code
    for the same verdict (``ERR_FRAME_SIZE`` 101 for a size below 14, ``ERR_BAD_MAGIC`` 104 for a magic
    outside 0..2 with ``known_magic_only``)."""

    reason: str
    code: int

    def error(self, position: int | None, where: str = "") -> CorruptRecordError:
        """The :class:`~kafkalog.errors.CorruptRecordError` to raise for it (``where``: e.g. `` in file x``)."""
        return CorruptRecordError(self.reason + where, position=position)


#: What :func:`next_frame` says: the frame's size (an ``int``, at least 26), or why there is none.
FrameVerdict = int | PartialTail | CorruptFrame

#: :attr:`CorruptFrame.code` values (the same numbers as ``kafkalog.records.kernels.ERR_*``).
SIZE_BELOW_OVERHEAD: Final = 101
UNKNOWN_MAGIC: Final = 104


def next_frame(
    buf: bytes | bytearray | memoryview, pos: int, end: int | None = None, *, known_magic_only: bool = False
) -> FrameVerdict:
    """Frame the entry at ``buf[pos]`` of ``buf[:end]``: its size, :data:`PARTIAL_TAIL` or a
    :class:`CorruptFrame` (see the module docstring for the rule). ``type(verdict) is int`` is a frame.

    ``known_magic_only`` is Kafka's in-memory reader (a magic outside 0..2 is corrupt); without it, a file
    reader's rule (any magic frames: below 2 legacy, from 2 on v2, :func:`is_v2_magic`). Reads at most 17
    bytes of ``buf``; ``end`` may lie past ``len(buf)`` when only the header was read. A size, not an
    object, for a frame: the offset search calls this once per batch.
    """
    remaining = (len(buf) if end is None else end) - pos
    if remaining <= HEADER_SIZE_UP_TO_MAGIC:
        return PARTIAL_TAIL
    size: int = _SIZE_UNPACK(buf, pos + LENGTH_OFFSET)[0]
    if size < RECORD_OVERHEAD_V0:
        return CorruptFrame(
            f"found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            SIZE_BELOW_OVERHEAD,
        )
    if LOG_OVERHEAD + size > remaining:
        return PARTIAL_TAIL
    if known_magic_only and buf[pos + MAGIC_OFFSET] > _MAGIC_V2:  # above 2, or negative (>= 128 unsigned)
        return CorruptFrame(f"invalid magic found in record: {frame_magic(buf, pos)}", UNKNOWN_MAGIC)
    return LOG_OVERHEAD + size


def frame_magic(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """The signed magic byte of the entry at ``buf[pos]`` (byte 16 of every format)."""
    magic: int = buf[pos + MAGIC_OFFSET]
    return magic - 256 if magic >= 128 else magic


def is_v2_magic(magic: int) -> bool:
    """Whether a file reader reads an entry of this (signed) magic as a v2 batch (``FileLogInputStream``:
    magic >= 2); below 2 it is a legacy entry (any magic but 0 has the v1 layout)."""
    return magic >= _MAGIC_V2
