"""The framing of a log: where each entry of a buffer of batches ends, and the v2 batch header's layout.

Every ``.log`` file, fetch response and produce request is a concatenation of entries, each
``baseOffset int64 · batchLength int32 · ...`` with the magic byte at offset 16 (``MAGIC_OFFSET``) whatever
the format. This module owns the one rule that frames them, :func:`next_frame`, which every frame walker
in kafkalog calls (the numba kernels keep an inlined copy, pinned to it by
``tests/records/test_framing.py``). For the entry at ``pos`` of ``buf[:end]`` it says:

* ``HEADER_SIZE_UP_TO_MAGIC`` (17) bytes or fewer left: :data:`PARTIAL_TAIL` (quiet: a walk ends there),
  Kafka's ``FileLogInputStream`` (``position >= end - 17``);
* ``batchLength < 14`` (``RECORD_OVERHEAD_V0``, the smallest entry of any format): a :class:`CorruptFrame`;
* ``LOG_OVERHEAD + batchLength`` past ``end``: :data:`PARTIAL_TAIL` (a fetch cut at max bytes, a crash);
* else a :class:`Frame` of that size and the entry's (signed) magic. Which format that magic means is
  Kafka's rule for the reader at hand:

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
    "CorruptFrame",
    "Frame",
    "FrameVerdict",
    "PartialTail",
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
_OFFSET_AND_SIZE: Final = struct.Struct(">qi")
_SIZE: Final = struct.Struct(">i")


class Frame(NamedTuple):
    """A complete entry: ``size`` bytes (``LOG_OVERHEAD + batchLength``) and its signed ``magic`` byte."""

    size: int
    magic: int

    @property
    def is_v2(self) -> bool:
        """Whether a file reader reads it as a v2 batch (Kafka's ``FileLogInputStream``: magic >= 2)."""
        return self.magic >= _MAGIC_V2


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


FrameVerdict = Frame | PartialTail | CorruptFrame

#: :attr:`CorruptFrame.code` values (the same numbers as ``kafkalog.records.kernels.ERR_*``).
SIZE_BELOW_OVERHEAD: Final = 101
UNKNOWN_MAGIC: Final = 104


def next_frame(
    buf: bytes | bytearray | memoryview, pos: int, end: int | None = None, *, known_magic_only: bool = False
) -> FrameVerdict:
    """Frame the entry at ``buf[pos]`` of ``buf[:end]`` (see the module docstring for the rule).

    ``known_magic_only`` is Kafka's in-memory reader (a magic outside 0..2 is corrupt); without it, a file
    reader's rule (any magic frames: below 2 legacy, from 2 on v2). Reads at most 17 bytes of ``buf``.
    """
    remaining = (len(buf) if end is None else end) - pos
    if remaining <= HEADER_SIZE_UP_TO_MAGIC:
        return PARTIAL_TAIL
    size = _SIZE.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    if size < RECORD_OVERHEAD_V0:
        return CorruptFrame(
            f"found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            SIZE_BELOW_OVERHEAD,
        )
    if LOG_OVERHEAD + size > remaining:
        return PARTIAL_TAIL
    magic = buf[pos + MAGIC_OFFSET]
    if magic >= 128:
        magic -= 256
    if known_magic_only and not 0 <= magic <= _MAGIC_V2:
        return CorruptFrame(f"invalid magic found in record: {magic}", UNKNOWN_MAGIC)
    return Frame(LOG_OVERHEAD + size, magic)
