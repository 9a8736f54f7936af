"""The Aiven tiered-storage plugin's segment manifest (``<...>.rsm-manifest``) and its chunk index.

Format owned here (as the plugin writes it, ``SegmentManifestV1`` serialized by Jackson, compact JSON)::

    {"version":"1",
     "chunkIndex":{"type":"fixed","originalChunkSize":C,"originalFileSize":F,
                   "transformedChunkSize":T,"finalTransformedChunkSize":L}
               | {"type":"variable","originalChunkSize":C,"originalFileSize":F,
                   "transformedChunks":"<base64 of zstd(ChunkSizesBinaryCodec(sizes))>"},
     "segmentIndexes":{"offset":{"position":P,"size":S},"timestamp":{...},"producerSnapshot":{...},
                       "leaderEpoch":{...},"transaction":{...}|null},                           # since 2023-10
     "compression":bool,
     "encryption":{"dataKey":"<kekId>:<base64 RSA-OAEP(SHA3-512) wrapped AES key>","aad":"<base64>"},  # optional
     "remoteLogSegmentMetadata":{...}}                                                                   # optional

* The original ``.log`` is cut into chunks of ``originalChunkSize`` bytes (the last one shorter); each is
  transformed on its own (zstd, then AES-GCM) and the results concatenated into the ``.log`` object. A
  ``fixed`` index (no compression) has every transformed chunk ``transformedChunkSize`` long except the last
  (``finalTransformedChunkSize``); a ``variable`` one lists every transformed size.
* ``ChunkSizesBinaryCodec`` (big-endian): ``count:i32``; for ``count == 1`` just the value as ``i32``; for
  ``count > 1`` ``base:i32, bytesPerValue:u8, (count - 1) values - base in bytesPerValue bytes each, the
  last value as a full i32``. The zstd frame carries its content size; more than 10 MiB decoded is refused
  (the plugin's own bound).
* ``remoteLogSegmentMetadata`` has been written since plugin commit f9439410 (2023-09); older manifests lack
  it, and the reader takes the end offset from the data.
* ``segmentIndexes`` has been written since plugin commit 107d1653 (2023-10), which put a segment's indexes
  in one ``.indexes`` object; older manifests lack it (their indexes are objects of their own,
  :mod:`kafkalog.tiered.aiven`), and :attr:`SegmentManifest.segment_indexes` is None.

A manifest that is not this (bad JSON, a missing or mistyped field, sizes that do not add up) is a
:class:`~kafkalog.errors.RemoteStorageError` naming the object; a Puffin file (``PFA1`` magic: the Iceberg
mode's segment manifest) is an :class:`~kafkalog.errors.UnsupportedRemoteSegmentError`.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import zstandard

from kafkalog.errors import RemoteStorageError, UnsupportedRemoteSegmentError

__all__ = [
    "MAX_CHUNK_SIZES_BYTES",
    "PUFFIN_MAGIC",
    "Chunk",
    "ChunkIndex",
    "EncryptionMetadata",
    "RemoteLogSegmentMetadata",
    "SegmentIndex",
    "SegmentIndexes",
    "SegmentManifest",
    "decode_chunk_sizes",
    "encode_chunk_sizes",
    "manifest_json",
    "parse_manifest",
]

#: The plugin's ``TransformedChunksDeserializer.MAX_DECOMPRESSED_SIZE``.
MAX_CHUNK_SIZES_BYTES: Final = 10 * 1024 * 1024
#: First bytes of an Iceberg Puffin file (the Iceberg mode's segment manifest).
PUFFIN_MAGIC: Final = b"PFA1"
_INT32_MAX: Final = 2**31 - 1
_INDEX_NAMES: Final = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")


class _Bad(Exception):
    """A malformed manifest field (turned into a RemoteStorageError naming the object)."""


# --- ChunkSizesBinaryCodec --------------------------------------------------------------------------------


def _bytes_needed(value: int) -> int:
    return 1 if value <= 0xFF else 2 if value <= 0xFFFF else 3 if value <= 0xFFFFFF else 4


def encode_chunk_sizes(values: Sequence[int]) -> bytes:
    """``ChunkSizesBinaryCodec.encode``: the compact big-endian form of a list of non-negative int32s."""
    if any(not 0 <= v <= _INT32_MAX for v in values):
        raise ValueError("chunk sizes must be int32 values >= 0")
    count = len(values)
    if count == 0:
        return struct.pack(">i", 0)
    if count == 1:
        return struct.pack(">ii", 1, values[0])
    head = values[:-1]
    base = min(head)
    width = max(_bytes_needed(v - base) for v in head)
    body = b"".join((v - base).to_bytes(4, "big")[4 - width :] for v in head)
    return struct.pack(">iiB", count, base, width) + body + struct.pack(">i", values[-1])


def decode_chunk_sizes(data: bytes) -> list[int]:
    """``ChunkSizesBinaryCodec.decode`` (raises ``ValueError`` on a short or inconsistent encoding)."""
    if len(data) < 4:
        raise ValueError("chunk sizes: shorter than the count")
    (count,) = struct.unpack_from(">i", data, 0)
    if count < 0:
        raise ValueError(f"chunk sizes: negative count {count}")
    if count == 0:
        return []
    if count == 1:
        if len(data) < 8:
            raise ValueError("chunk sizes: missing the only value")
        return [struct.unpack_from(">i", data, 4)[0]]
    if len(data) < 9:
        raise ValueError("chunk sizes: missing base and width")
    base, width = struct.unpack_from(">iB", data, 4)
    if not 1 <= width <= 4:
        raise ValueError(f"chunk sizes: {width} bytes per value")
    need = 9 + (count - 1) * width + 4
    if len(data) < need:
        raise ValueError(f"chunk sizes: {len(data)} bytes, {need} needed for {count} values")
    out = [base + int.from_bytes(data[9 + i * width : 9 + (i + 1) * width], "big") for i in range(count - 1)]
    out.append(struct.unpack_from(">i", data, need - 4)[0])
    return out


# --- value types ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """One chunk: its position and size in the original file and in the transformed object."""

    index: int
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int


@dataclass(frozen=True)
class ChunkIndex:
    """Where each original chunk lies in the transformed ``.log`` object (fixed or variable sizes)."""

    kind: Literal["fixed", "variable"]
    original_chunk_size: int
    original_file_size: int
    transformed_sizes: tuple[int, ...]
    #: ``transformed_positions[i]`` is where chunk ``i`` starts in the object; one more entry: the total size.
    transformed_positions: tuple[int, ...] = field(repr=False, compare=False, default=())

    @staticmethod
    def chunk_count(original_chunk_size: int, original_file_size: int) -> int:
        """How many chunks an original file of this size is cut into."""
        return -(-original_file_size // original_chunk_size)

    @classmethod
    def build(
        cls,
        kind: Literal["fixed", "variable"],
        original_chunk_size: int,
        original_file_size: int,
        transformed_sizes: Sequence[int],
    ) -> ChunkIndex:
        """An index with its positions computed (``transformed_sizes`` has one entry per chunk)."""
        positions = [0]
        for size in transformed_sizes:
            positions.append(positions[-1] + size)
        return cls(kind, original_chunk_size, original_file_size, tuple(transformed_sizes), tuple(positions))

    @property
    def count(self) -> int:
        """Number of chunks."""
        return len(self.transformed_sizes)

    @property
    def transformed_file_size(self) -> int:
        """Size the ``.log`` object must have."""
        return self.transformed_positions[-1]

    def chunk(self, i: int) -> Chunk:
        """Chunk ``i``."""
        start = i * self.original_chunk_size
        size = min(self.original_chunk_size, self.original_file_size - start)
        return Chunk(i, start, size, self.transformed_positions[i], self.transformed_sizes[i])

    def chunks_for_range(self, start: int, end: int) -> list[Chunk]:
        """The chunks holding original bytes ``[start, end)`` (clipped to the file)."""
        end = min(end, self.original_file_size)
        if start >= end:
            return []
        first = start // self.original_chunk_size
        last = (end - 1) // self.original_chunk_size
        return [self.chunk(i) for i in range(first, last + 1)]

    def chunk_at_transformed(self, position: int) -> int:
        """The chunk whose transformed bytes hold ``position``."""
        return bisect.bisect_right(self.transformed_positions, position) - 1


@dataclass(frozen=True)
class SegmentIndex:
    """One index's slice of the ``.indexes`` object (its transformed bytes)."""

    position: int
    size: int


@dataclass(frozen=True)
class SegmentIndexes:
    """The five parts of the ``.indexes`` object, in upload order; ``transaction`` is None when absent."""

    offset: SegmentIndex
    timestamp: SegmentIndex
    producer_snapshot: SegmentIndex
    leader_epoch: SegmentIndex
    transaction: SegmentIndex | None

    def end(self) -> int:
        """How long the ``.indexes`` object must be."""
        parts = [self.offset, self.timestamp, self.producer_snapshot, self.leader_epoch, self.transaction]
        return max(p.position + p.size for p in parts if p is not None)


@dataclass(frozen=True)
class EncryptionMetadata:
    """The wrapped data key (``<kekId>:<base64>``, never logged) and the GCM additional data."""

    data_key: str = field(repr=False)
    aad: bytes

    @property
    def key_id(self) -> str:
        """The key-encryption key id (the part before ``:``)."""
        return self.data_key.partition(":")[0]


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """Kafka's ``RemoteLogSegmentMetadata`` as the manifest serializes it."""

    topic_id: str
    topic: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: dict[int, int]


@dataclass(frozen=True)
class SegmentManifest:
    """A parsed ``.rsm-manifest``."""

    chunk_index: ChunkIndex
    #: None: a manifest from before October 2023, whose indexes are separate objects.
    segment_indexes: SegmentIndexes | None
    compression: bool
    encryption: EncryptionMetadata | None
    remote_log_segment_metadata: RemoteLogSegmentMetadata | None


# --- parsing ----------------------------------------------------------------------------------------------


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{where} is not a JSON object")
    return value


def _int(obj: Mapping[str, Any], name: str, where: str, *, lo: int = 0, hi: int = 2**63 - 1) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{where}.{name} is missing or not an integer")
    if not lo <= value <= hi:
        raise _Bad(f"{where}.{name} = {value} is out of range")
    return value


def _str(obj: Mapping[str, Any], name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise _Bad(f"{where}.{name} is missing or not a string")
    return value


def _b64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _Bad(f"{where} is not base64") from None


def _chunk_index(obj: dict[str, Any]) -> ChunkIndex:
    where = "chunkIndex"
    kind = obj.get("type")
    original_chunk_size = _int(obj, "originalChunkSize", where, lo=1, hi=_INT32_MAX)
    original_file_size = _int(obj, "originalFileSize", where, hi=_INT32_MAX)
    count = ChunkIndex.chunk_count(original_chunk_size, original_file_size)
    if kind == "fixed":
        size = _int(obj, "transformedChunkSize", where, hi=_INT32_MAX)
        final = _int(obj, "finalTransformedChunkSize", where, hi=_INT32_MAX)
        sizes = [size] * (count - 1) + [final] if count else []
        return ChunkIndex.build("fixed", original_chunk_size, original_file_size, sizes)
    if kind == "variable":
        compressed = _b64(_str(obj, "transformedChunks", where), f"{where}.transformedChunks")
        try:
            content_size = zstandard.frame_content_size(compressed)
        except zstandard.ZstdError:
            raise _Bad(f"{where}.transformedChunks is not a zstd frame") from None
        if not 0 <= content_size <= MAX_CHUNK_SIZES_BYTES:
            raise _Bad(f"{where}.transformedChunks: invalid decompressed size {content_size}")
        try:
            raw = zstandard.ZstdDecompressor().decompress(compressed, max_output_size=MAX_CHUNK_SIZES_BYTES)
            values = decode_chunk_sizes(raw)
        except (zstandard.ZstdError, ValueError) as exc:
            raise _Bad(f"{where}.transformedChunks: {exc}") from None
        if len(values) != count or any(v < 0 for v in values):
            raise _Bad(
                f"{where}.transformedChunks lists {len(values)} chunk sizes, but {original_file_size} bytes "
                f"in chunks of {original_chunk_size} make {count}"
            )
        return ChunkIndex.build("variable", original_chunk_size, original_file_size, values)
    raise _Bad(f"{where}.type is {kind!r}, not 'fixed' or 'variable'")


def _segment_indexes(obj: dict[str, Any]) -> SegmentIndexes:
    parts: dict[str, SegmentIndex | None] = {}
    for name in _INDEX_NAMES:
        value = obj.get(name)
        if value is None and name == "transaction":
            parts[name] = None
            continue
        where = f"segmentIndexes.{name}"
        part = _obj(value, where)
        parts[name] = SegmentIndex(
            _int(part, "position", where, hi=_INT32_MAX), _int(part, "size", where, hi=_INT32_MAX)
        )
    offset, timestamp, snapshot, epoch = (parts[n] for n in _INDEX_NAMES[:4])
    assert offset is not None and timestamp is not None and snapshot is not None and epoch is not None
    return SegmentIndexes(offset, timestamp, snapshot, epoch, parts["transaction"])


def _metadata(obj: dict[str, Any]) -> RemoteLogSegmentMetadata:
    where = "remoteLogSegmentMetadata"
    sid = _obj(obj.get("remoteLogSegmentId"), f"{where}.remoteLogSegmentId")
    tip = _obj(sid.get("topicIdPartition"), f"{where}.remoteLogSegmentId.topicIdPartition")
    tp = _obj(tip.get("topicPartition"), f"{where}.remoteLogSegmentId.topicIdPartition.topicPartition")
    epochs_obj = _obj(obj.get("segmentLeaderEpochs", {}), f"{where}.segmentLeaderEpochs")
    epochs: dict[int, int] = {}
    for key in epochs_obj:
        try:
            epoch = int(key)
        except ValueError:
            raise _Bad(f"{where}.segmentLeaderEpochs has a non-integer epoch {key!r}") from None
        epochs[epoch] = _int(epochs_obj, key, f"{where}.segmentLeaderEpochs")
    start = _int(obj, "startOffset", where)
    end = _int(obj, "endOffset", where)
    if end < start:
        raise _Bad(f"{where}: endOffset {end} < startOffset {start}")
    return RemoteLogSegmentMetadata(
        topic_id=_str(tip, "topicId", where),
        topic=_str(tp, "topic", where),
        partition=_int(tp, "partition", where, hi=_INT32_MAX),
        segment_id=_str(sid, "id", where),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=_int(obj, "maxTimestampMs", where, lo=-(2**63)),
        broker_id=_int(obj, "brokerId", where, lo=-(2**31), hi=_INT32_MAX),
        event_timestamp_ms=_int(obj, "eventTimestampMs", where, lo=-(2**63)),
        segment_leader_epochs=dict(sorted(epochs.items())),
    )


def parse_manifest(data: bytes, name: str) -> SegmentManifest:
    """Parse a ``.rsm-manifest`` (``name``: the object, for errors)."""
    if data.startswith(PUFFIN_MAGIC):
        raise UnsupportedRemoteSegmentError(
            f"{name}: a Puffin file, the segment manifest of the Aiven plugin's Iceberg mode "
            "(segment.format=iceberg): its records are Parquet rows in an Iceberg table, not Kafka segment "
            "bytes; kafkalog reads only segment.format=kafka archives"
        )
    try:
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise _Bad(f"not JSON ({exc})") from None
        doc = _obj(doc, "the manifest")
        if doc.get("version") != "1":
            raise _Bad(f"version is {doc.get('version')!r}; only manifest version '1' is known")
        compression = doc.get("compression")
        if not isinstance(compression, bool):
            raise _Bad("compression is missing or not a boolean")
        chunk_index = _chunk_index(_obj(doc.get("chunkIndex"), "chunkIndex"))
        indexes = (
            None
            if doc.get("segmentIndexes") is None
            else _segment_indexes(_obj(doc["segmentIndexes"], "segmentIndexes"))
        )
        encryption = None
        if doc.get("encryption") is not None:
            enc = _obj(doc["encryption"], "encryption")
            data_key = _str(enc, "dataKey", "encryption")
            kek_id, colon, wrapped = data_key.partition(":")
            if not colon or not kek_id.strip() or ":" in wrapped or not wrapped:
                raise _Bad("encryption.dataKey is not '<key id>:<base64>'")
            _b64(wrapped, "encryption.dataKey")
            encryption = EncryptionMetadata(data_key, _b64(_str(enc, "aad", "encryption"), "encryption.aad"))
        metadata = None
        if doc.get("remoteLogSegmentMetadata") is not None:
            metadata = _metadata(_obj(doc["remoteLogSegmentMetadata"], "remoteLogSegmentMetadata"))
    except _Bad as exc:
        raise RemoteStorageError(f"{name}: corrupt segment manifest: {exc}") from None
    return SegmentManifest(chunk_index, indexes, compression, encryption, metadata)


# --- writing (test writers) -------------------------------------------------------------------------------


def manifest_json(manifest: SegmentManifest) -> bytes:
    """The manifest as the plugin's Jackson mapper writes it (field order and compact separators)."""
    ci = manifest.chunk_index
    chunk_index: dict[str, Any] = {
        "type": ci.kind,
        "originalChunkSize": ci.original_chunk_size,
        "originalFileSize": ci.original_file_size,
    }
    if ci.kind == "fixed":
        sizes = ci.transformed_sizes
        chunk_index["transformedChunkSize"] = sizes[0] if sizes else 0
        chunk_index["finalTransformedChunkSize"] = sizes[-1] if sizes else 0
    else:
        cctx = zstandard.ZstdCompressor(write_content_size=True)
        packed = cctx.compress(encode_chunk_sizes(ci.transformed_sizes))
        chunk_index["transformedChunks"] = base64.b64encode(packed).decode("ascii")
    si = manifest.segment_indexes

    def part(p: SegmentIndex | None) -> dict[str, int] | None:
        return None if p is None else {"position": p.position, "size": p.size}

    doc: dict[str, Any] = {"version": "1", "chunkIndex": chunk_index}
    if si is not None:
        doc["segmentIndexes"] = {
            "offset": part(si.offset),
            "timestamp": part(si.timestamp),
            "producerSnapshot": part(si.producer_snapshot),
            "leaderEpoch": part(si.leader_epoch),
            "transaction": part(si.transaction),
        }
    doc["compression"] = manifest.compression
    if manifest.encryption is not None:
        doc["encryption"] = {
            "dataKey": manifest.encryption.data_key,
            "aad": base64.b64encode(manifest.encryption.aad).decode("ascii"),
        }
    md = manifest.remote_log_segment_metadata
    if md is not None:
        doc["remoteLogSegmentMetadata"] = {
            "remoteLogSegmentId": {
                "topicIdPartition": {
                    "topicId": md.topic_id,
                    "topicPartition": {"topic": md.topic, "partition": md.partition},
                },
                "id": md.segment_id,
            },
            "startOffset": md.start_offset,
            "endOffset": md.end_offset,
            "maxTimestampMs": md.max_timestamp_ms,
            "brokerId": md.broker_id,
            "eventTimestampMs": md.event_timestamp_ms,
            "segmentLeaderEpochs": {str(k): v for k, v in sorted(md.segment_leader_epochs.items())},
        }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")
