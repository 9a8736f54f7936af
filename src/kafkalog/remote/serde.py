"""Codecs for the values of Kafka's ``__remote_log_metadata`` records (``RemoteLogMetadataSerde``).

A value is ``unsigned-varint apiKey`` + ``unsigned-varint version`` + the message body in Kafka's flexible
(KIP-482) encoding, all big-endian:

* ``int8/int32/int64`` fixed width; ``uuid`` 16 bytes (most significant half first);
* ``string`` compact: ``uvarint(len + 1)`` then UTF-8 (0 = null, refused for these non-nullable fields);
* nullable ``bytes`` compact: ``uvarint(len + 1)`` then the bytes, 0 = null;
* arrays compact: ``uvarint(count + 1)`` then the elements (0 = null, refused);
* every struct, and the message itself, ends with a tagged-field section: ``uvarint(count)`` then per field
  ``uvarint(tag)`` ``uvarint(size)`` and ``size`` bytes, tags strictly ascending.

API keys (``storage/src/main/resources/message/*.json``): 0 ``RemoteLogSegmentMetadataRecord``, 1
``RemoteLogSegmentMetadataUpdateRecord``, 2 ``RemotePartitionDeleteMetadataRecord``, 3
``RemoteLogSegmentMetadataSnapshotRecord``; each defines version 0, flexible. Versions 1 of keys 0 and 1 add
only tagged fields, so their body is read as version 0's and their tags are kept as unknown tagged fields
(:data:`MAX_VERSIONS`). Unknown top-level tags are kept and written back; unknown tags of nested structs are
skipped. The encoder writes version 0 with tags in ascending order.

Decoding never trusts a length: every count and size is checked against the bytes left before anything is
allocated, so hostile bytes raise :class:`~kafkalog.errors.CorruptRecordError` (framing: truncation, impossible
lengths, trailing bytes, null where Kafka forbids it) or :class:`~kafkalog.errors.InvalidRecordError` (well
framed but invalid: unknown api key, version or state, bad UTF-8, offsets Kafka's constructors refuse).
"""

from __future__ import annotations

import struct
from typing import Final

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records.varint import encode_uvarint
from kafkalog.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TaggedFields,
    TopicIdPartition,
    Uuid,
)

__all__ = [
    "MAX_VERSIONS",
    "REMOTE_LOG_SEGMENT_METADATA_API_KEY",
    "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY",
    "REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY",
    "REMOTE_PARTITION_DELETE_METADATA_API_KEY",
    "RemoteLogMetadata",
    "deserialize",
    "serialize",
]

REMOTE_LOG_SEGMENT_METADATA_API_KEY: Final = 0
REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY: Final = 1
REMOTE_PARTITION_DELETE_METADATA_API_KEY: Final = 2
REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY: Final = 3

#: Highest version read per api key (version 0 is what Kafka's schemas define and what :func:`serialize` writes).
MAX_VERSIONS: Final = {0: 1, 1: 1, 2: 0, 3: 0}

_NAMES: Final = {
    0: "RemoteLogSegmentMetadataRecord",
    1: "RemoteLogSegmentMetadataUpdateRecord",
    2: "RemotePartitionDeleteMetadataRecord",
    3: "RemoteLogSegmentMetadataSnapshotRecord",
}

#: A value of the ``__remote_log_metadata`` topic.
RemoteLogMetadata = (
    RemoteLogSegmentMetadata
    | RemoteLogSegmentMetadataUpdate
    | RemotePartitionDeleteMetadata
    | RemoteLogSegmentMetadataSnapshot
)

_I8: Final = struct.Struct(">b")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_UUID: Final = struct.Struct(">qq")
#: Decoded ``TopicIdPartition`` structs (name, id, partition, no tagged field) by their bytes: every record of
#: a replay names one of a few partitions, decoded once (bounded: cleared when full).
_TIP_CACHE: dict[bytes, TopicIdPartition] = {}
_TIP_CACHE_MAX: Final = 4096
#: Smallest encoding of one SegmentLeaderEpochEntry: int32 + int64 + an empty tagged-field section.
_MIN_EPOCH_ENTRY: Final = 13


# --- encoding --------------------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def uvarint(self, value: int) -> None:
        self.out += encode_uvarint(value)

    def i8(self, value: int) -> None:
        self.out += _I8.pack(value)

    def i32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def i64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def uuid(self, value: Uuid) -> None:
        self.out += value.to_bytes()

    def string(self, value: str) -> None:
        raw = value.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise InvalidRecordError(f"string of {len(raw)} bytes is longer than the 32767 Kafka allows")
        self.uvarint(len(raw) + 1)
        self.out += raw

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.uvarint(0)
            return
        self.uvarint(len(value) + 1)
        self.out += value

    def tags(self, fields: TaggedFields = ()) -> None:
        self.uvarint(len(fields))
        last = -1
        for tag, raw in sorted(fields):
            if tag == last:
                raise InvalidRecordError(f"tagged field {tag} appears twice")
            last = tag
            self.uvarint(tag)
            self.uvarint(len(raw))
            self.out += raw

    def topic_id_partition(self, tp: TopicIdPartition) -> None:
        self.string(tp.topic)
        self.uuid(tp.topic_id)
        self.i32(tp.partition)
        self.tags()

    def segment_id(self, segment_id: RemoteLogSegmentId) -> None:
        self.topic_id_partition(segment_id.topic_id_partition)
        self.uuid(segment_id.id)
        self.tags()

    def leader_epochs(self, epochs: tuple[tuple[int, int], ...]) -> None:
        self.uvarint(len(epochs) + 1)
        for epoch, offset in epochs:
            self.i32(epoch)
            self.i64(offset)
            self.tags()


def serialize(metadata: RemoteLogMetadata) -> bytes:
    """The ``__remote_log_metadata`` record value of ``metadata`` (version 0, as Kafka's serde writes today).

    A field outside its schema type's range (an ``int32`` broker id of 2**31, say) is an
    :class:`~kafkalog.errors.InvalidRecordError`.
    """
    try:
        return _serialize(metadata)
    except struct.error as exc:
        raise InvalidRecordError(f"cannot encode {type(metadata).__name__}: {exc}") from None


def _serialize(metadata: RemoteLogMetadata) -> bytes:
    w = _Writer()
    if isinstance(metadata, RemoteLogSegmentMetadata):
        w.uvarint(REMOTE_LOG_SEGMENT_METADATA_API_KEY)
        w.uvarint(0)
        w.segment_id(metadata.remote_log_segment_id)
        w.i64(metadata.start_offset)
        w.i64(metadata.end_offset)
        w.i32(metadata.broker_id)
        w.i64(metadata.max_timestamp_ms)
        w.i64(metadata.event_timestamp_ms)
        w.leader_epochs(metadata.segment_leader_epochs)
        w.i32(metadata.segment_size_in_bytes)
        w.nullable_bytes(metadata.custom_metadata)
        w.i8(metadata.state)
    elif isinstance(metadata, RemoteLogSegmentMetadataUpdate):
        w.uvarint(REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY)
        w.uvarint(0)
        w.segment_id(metadata.remote_log_segment_id)
        w.i32(metadata.broker_id)
        w.i64(metadata.event_timestamp_ms)
        w.nullable_bytes(metadata.custom_metadata)
        w.i8(metadata.state)
    elif isinstance(metadata, RemotePartitionDeleteMetadata):
        w.uvarint(REMOTE_PARTITION_DELETE_METADATA_API_KEY)
        w.uvarint(0)
        w.topic_id_partition(metadata.topic_id_partition)
        w.i32(metadata.broker_id)
        w.i64(metadata.event_timestamp_ms)
        w.i8(metadata.state)
    else:
        w.uvarint(REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY)
        w.uvarint(0)
        w.uuid(metadata.segment_id)
        w.i64(metadata.start_offset)
        w.i64(metadata.end_offset)
        w.i32(metadata.broker_id)
        w.i64(metadata.max_timestamp_ms)
        w.i64(metadata.event_timestamp_ms)
        w.leader_epochs(metadata.segment_leader_epochs)
        w.i32(metadata.segment_size_in_bytes)
        w.nullable_bytes(metadata.custom_metadata)
        w.i8(metadata.state)
    w.tags(metadata.unknown_tagged_fields)
    return bytes(w.out)


# --- decoding --------------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview) -> None:
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
        self.pos = 0
        self.end = len(self.buf)

    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise CorruptRecordError(f"{what} needs {n} bytes, {self.left()} left", position=self.pos)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw

    def uvarint(self, what: str) -> int:
        """Kafka's ``readUnsignedVarint``: at most 5 bytes, a 32-bit value."""
        pos = self.pos
        if pos < self.end:
            b = self.buf[pos]
            if b < 0x80:  # one byte: the common case (api keys, versions, short lengths, no tags)
                self.pos = pos + 1
                return b
        return self._long_uvarint(what)

    def _long_uvarint(self, what: str) -> int:
        start = self.pos
        result = 0
        for shift in range(0, 35, 7):
            if self.pos >= self.end:
                raise CorruptRecordError(f"{what} runs past the end of the value", position=start)
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result > 0xFFFFFFFF:
                    break
                return result
        raise CorruptRecordError(f"{what} is not a valid unsigned varint", position=start)

    def _fixed(self, n: int, what: str) -> int:
        """The position of ``n`` fixed-width bytes, checked and skipped."""
        pos = self.pos
        if pos + n > self.end:
            raise CorruptRecordError(f"{what} needs {n} bytes, {self.left()} left", position=pos)
        self.pos = pos + n
        return pos

    def i8(self) -> int:
        value: int = _I8.unpack_from(self.buf, self._fixed(1, "int8"))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack_from(self.buf, self._fixed(4, "int32"))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack_from(self.buf, self._fixed(8, "int64"))[0]
        return value

    def uuid(self) -> Uuid:
        most, least = _UUID.unpack_from(self.buf, self._fixed(16, "uuid"))
        return Uuid(most, least)

    def length(self, what: str, nullable: bool) -> int | None:
        start = self.pos
        n = self.uvarint(f"{what} length")
        if n == 0:
            if nullable:
                return None
            raise CorruptRecordError(f"non-nullable field {what} was serialized as null", position=start)
        return n - 1

    def string(self, what: str) -> str:
        start = self.pos
        n = self.length(what, nullable=False)
        assert n is not None
        if n > 0x7FFF:
            raise CorruptRecordError(f"string field {what} had invalid length {n}", position=start)
        try:
            return self.take(n, what).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordError(f"string field {what} is not valid UTF-8", position=start) from None

    def nullable_bytes(self, what: str) -> bytes | None:
        n = self.length(what, nullable=True)
        return None if n is None else self.take(n, what)

    def tags(self, what: str) -> TaggedFields:
        pos = self.pos
        if pos < self.end and self.buf[pos] == 0:  # no tagged field: the common case
            self.pos = pos + 1
            return ()
        start = pos
        count = self.uvarint(f"{what} tagged field count")
        if count * 2 > self.left():  # each field takes at least a tag and a size byte
            raise CorruptRecordError(
                f"{what} claims {count} tagged fields in {self.left()} bytes", position=start
            )
        fields: list[tuple[int, bytes]] = []
        last = -1
        for _ in range(count):
            tag = self.uvarint(f"{what} tag")
            if tag <= last:
                raise CorruptRecordError(
                    f"{what} tagged fields out of order (tag {tag} after {last})", position=start
                )
            last = tag
            size = self.uvarint(f"{what} tagged field size")
            fields.append((tag, self.take(size, f"{what} tagged field {tag}")))
        return tuple(fields)

    def topic_id_partition(self) -> TopicIdPartition:
        start = self.pos
        n = self.buf[start] - 1 if start < self.end and self.buf[start] < 0x80 else -1
        stop = start + 1 + n + 16 + 4  # its tag count, when the name's length is one byte
        if n >= 0 and stop < self.end and self.buf[stop] == 0:
            raw = bytes(self.buf[start : stop + 1])
            cached = _TIP_CACHE.get(raw)
            if cached is not None:
                self.pos = stop + 1
                return cached
        else:
            raw = b""
        name = self.string("Name")
        topic_id = self.uuid()
        partition = self.i32()
        self.tags("TopicIdPartition")
        tip = TopicIdPartition(topic_id, name, partition)
        if raw and self.pos == stop + 1:
            if len(_TIP_CACHE) >= _TIP_CACHE_MAX:
                _TIP_CACHE.clear()
            _TIP_CACHE[raw] = tip
        return tip

    def segment_id(self) -> RemoteLogSegmentId:
        tp = self.topic_id_partition()
        segment = self.uuid()
        self.tags("RemoteLogSegmentId")
        return RemoteLogSegmentId(tp, segment)

    def leader_epochs(self) -> list[tuple[int, int]]:
        start = self.pos
        count = self.length("SegmentLeaderEpochs", nullable=False)
        assert count is not None
        if count * _MIN_EPOCH_ENTRY > self.left():
            raise CorruptRecordError(
                f"SegmentLeaderEpochs claims {count} entries in {self.left()} bytes", position=start
            )
        out: list[tuple[int, int]] = []
        for _ in range(count):
            epoch = self.i32()
            offset = self.i64()
            self.tags("SegmentLeaderEpochEntry")
            out.append((epoch, offset))
        return out


def deserialize(value: bytes | bytearray | memoryview) -> RemoteLogMetadata:
    """Decode a ``__remote_log_metadata`` record value (see the module docstring for the errors)."""
    r = _Reader(value)
    api_key = r.uvarint("apiKey")
    version = r.uvarint("version")
    if api_key not in MAX_VERSIONS:
        raise InvalidRecordError(f"apiKey: {api_key} is not supported")
    if version > MAX_VERSIONS[api_key]:
        raise InvalidRecordError(f"Can't read version {version} of {_NAMES[api_key]}")
    result: RemoteLogMetadata
    if api_key in (REMOTE_LOG_SEGMENT_METADATA_API_KEY, REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_API_KEY):
        segment: RemoteLogSegmentId | Uuid = r.segment_id() if api_key == 0 else r.uuid()
        start_offset = r.i64()
        end_offset = r.i64()
        broker_id = r.i32()
        max_timestamp_ms = r.i64()
        event_timestamp_ms = r.i64()
        epochs = r.leader_epochs()
        size = r.i32()
        custom = r.nullable_bytes("CustomMetadata")
        state = RemoteLogSegmentState.for_id(r.i8())
        tags = r.tags(_NAMES[api_key])
        if isinstance(segment, RemoteLogSegmentId):
            result = RemoteLogSegmentMetadata(
                segment, start_offset, end_offset, max_timestamp_ms, broker_id, event_timestamp_ms, size,
                tuple(epochs), custom, state, tags,
            )  # fmt: skip
        else:
            result = RemoteLogSegmentMetadataSnapshot(
                segment, start_offset, end_offset, max_timestamp_ms, broker_id, event_timestamp_ms, size,
                tuple(epochs), custom, state, tags,
            )  # fmt: skip
    elif api_key == REMOTE_LOG_SEGMENT_METADATA_UPDATE_API_KEY:
        segment_id = r.segment_id()
        broker_id = r.i32()
        event_timestamp_ms = r.i64()
        custom = r.nullable_bytes("CustomMetadata")
        state = RemoteLogSegmentState.for_id(r.i8())
        tags = r.tags(_NAMES[api_key])
        result = RemoteLogSegmentMetadataUpdate(
            segment_id, event_timestamp_ms, custom, state, broker_id, tags
        )
    else:
        tp = r.topic_id_partition()
        broker_id = r.i32()
        event_timestamp_ms = r.i64()
        delete_state = RemotePartitionDeleteState.for_id(r.i8())
        tags = r.tags(_NAMES[api_key])
        result = RemotePartitionDeleteMetadata(tp, delete_state, event_timestamp_ms, broker_id, tags)
    if r.left():
        raise CorruptRecordError(f"{r.left()} trailing bytes after {_NAMES[api_key]}", position=r.pos)
    return result
