"""Codecs of the ``__remote_log_metadata`` record values.

No Kafka jar in reach ships the generated ``RemoteLogSegmentMetadata*Record`` classes (``kafka-storage``: the
interop harness's ``pyflink/lib`` has only ``kafka-clients``), so the vectors below are built by hand, field by
field, from Kafka's JSON schemas (``storage/src/main/resources/message/*.json``) and the flexible-version rules
(compact strings/arrays/bytes as ``uvarint(n + 1)``, a tagged-field section after every struct). ``test_interop``
checks the same codec against kafka-clients' protocol types through the Java harness.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.remote import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
    deserialize,
    serialize,
)

TOPIC_ID = Uuid(0x123456789ABCDEF0, 0x0FEDCBA987654321)
SEGMENT_UUID = Uuid(1, 2)
TP = TopicIdPartition(TOPIC_ID, "t", 3)
SEGMENT_ID = RemoteLogSegmentId(TP, SEGMENT_UUID)

# Pieces of the hand-built vectors, in schema order.
TOPIC_ID_PARTITION = "0274123456789abcdef00fedcba9876543210000000300"  # Name "t", Id, Partition, tags
SEGMENT_ID_ENTRY = TOPIC_ID_PARTITION + "0000000000000001000000000000000200"  # TopicIdPartition, Id, tags

SEGMENT_VECTOR = bytes.fromhex(
    "00"
    "00" + SEGMENT_ID_ENTRY + "0000000000000064"  # apiKey 0, version 0  # StartOffset 100
    "00000000000000c7"  # EndOffset 199
    "00000005"  # BrokerId 5
    "0000018c00000000"  # MaxTimestampMs
    "0000018c00000001"  # EventTimestampMs
    "03"  # SegmentLeaderEpochs: 2 entries
    "00000002"
    "0000000000000064"
    "00"  # epoch 2 from 100
    "00000003"
    "0000000000000096"
    "00"  # epoch 3 from 150
    "00001000"  # SegmentSizeInBytes 4096
    "04"
    "aabbcc"  # CustomMetadata 3 bytes
    "00"  # RemoteLogSegmentState COPY_SEGMENT_STARTED
    "00"  # tagged fields
)
SEGMENT = RemoteLogSegmentMetadata(
    SEGMENT_ID, 100, 199, 0x18C00000000, 5, 0x18C00000001, 4096, ((3, 150), (2, 100)), b"\xaa\xbb\xcc"
)

UPDATE_VECTOR = bytes.fromhex(
    "01"
    "00" + SEGMENT_ID_ENTRY + "00000006"  # BrokerId 6
    "0000018c00000002"  # EventTimestampMs
    "00"  # CustomMetadata null
    "01"  # COPY_SEGMENT_FINISHED
    "00"
)
UPDATE = RemoteLogSegmentMetadataUpdate(
    SEGMENT_ID, 0x18C00000002, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 6
)

DELETE_VECTOR = bytes.fromhex(
    "02"
    "00" + TOPIC_ID_PARTITION + "ffffffff"  # BrokerId -1
    "0000000000000007"  # EventTimestampMs
    "01"  # DELETE_PARTITION_STARTED
    "00"
)
DELETE = RemotePartitionDeleteMetadata(TP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 7, -1)

SNAPSHOT_VECTOR = bytes.fromhex(
    "03"
    "00"
    "0000000000000001"
    "0000000000000002"  # SegmentId
    "0000000000000000"  # StartOffset 0
    "0000000000000000"  # EndOffset 0
    "00000001"  # BrokerId
    "0000000000000009"  # MaxTimestampMs
    "000000000000000a"  # EventTimestampMs
    "02"
    "00000000"
    "0000000000000000"
    "00"  # one epoch entry
    "00000044"  # SegmentSizeInBytes 68
    "01"  # CustomMetadata empty (not null)
    "03"  # DELETE_SEGMENT_FINISHED
    "00"
)
SNAPSHOT = RemoteLogSegmentMetadataSnapshot(
    SEGMENT_UUID, 0, 0, 9, 1, 10, 68, ((0, 0),), b"", RemoteLogSegmentState.DELETE_SEGMENT_FINISHED
)


@pytest.mark.parametrize(
    ("value", "raw"),
    [
        (SEGMENT, SEGMENT_VECTOR),
        (UPDATE, UPDATE_VECTOR),
        (DELETE, DELETE_VECTOR),
        (SNAPSHOT, SNAPSHOT_VECTOR),
    ],
    ids=["segment", "update", "partition-delete", "snapshot"],
)
def test_hand_built_vectors(value: object, raw: bytes) -> None:
    assert serialize(value) == raw  # type: ignore[arg-type]
    assert deserialize(raw) == value
    assert deserialize(memoryview(bytearray(raw))) == value


def test_leader_epochs_sorted_and_deduplicated_as_a_tree_map() -> None:
    assert SEGMENT.segment_leader_epochs == ((2, 100), (3, 150))
    dup = RemoteLogSegmentMetadata(SEGMENT_ID, 0, 9, 0, 0, 0, 1, ((1, 0), (1, 5)))
    assert dup.segment_leader_epochs == ((1, 5),)


def test_version_1_and_unknown_tags_are_kept() -> None:
    """A later version adds only tagged fields: the body reads as v0's, the tags survive a round trip."""
    tagged = SEGMENT_VECTOR[:-1] + bytes.fromhex("02000101050400000007")
    v1 = b"\x00\x01" + tagged[2:]
    decoded = deserialize(v1)
    assert decoded == SEGMENT
    assert isinstance(decoded, RemoteLogSegmentMetadata)
    assert decoded.unknown_tagged_fields == ((0, b"\x01"), (5, b"\x00\x00\x00\x07"))
    assert serialize(decoded) == tagged


def test_uuid_strings_match_kafka() -> None:
    """Uuid.toString of Kafka's kafka-clients for the same halves (run once through the jar, pinned here)."""
    cases = {
        (0, 1): "AAAAAAAAAAAAAAAAAAAAAQ",
        (0, 0): "AAAAAAAAAAAAAAAAAAAAAA",
        (-1, -1): "_____________________w",
        (0x123456789ABCDEF0, 0x0FEDCBA987654321): "EjRWeJq83vAP7cuph2VDIQ",
        (-(2**63), 2**63 - 1): "gAAAAAAAAAB__________w",
        (7, -42): "AAAAAAAAAAf_________1g",
    }
    for (msb, lsb), text in cases.items():
        assert str(Uuid(msb, lsb)) == text
        assert Uuid.from_string(text) == Uuid(msb, lsb)
    assert Uuid(0, 1) == Uuid.METADATA_TOPIC_ID
    # As kafka-clients 3.9.1's Uuid.fromString: padding "==" accepted, the last character's unused bits ignored.
    assert Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAQ==") == Uuid(0, 1)
    assert Uuid.from_string("AAAAAAAAAAAAAAAAAAAAAR") == Uuid(0, 1)
    for bad in (
        "",
        "AAAA",
        "not base64!!",
        "A" * 30,
        "AAAAAAAAAAAAAAAAAAAA+Q",
        "AAAAAAAAAAAAAAAAAAAAAQ=",
        "A" * 23,
    ):
        with pytest.raises(InvalidRecordError, match="Unable to parse UUID string"):
            Uuid.from_string(bad)
    fresh = Uuid.random_uuid()
    assert fresh not in (Uuid.ZERO_UUID, Uuid.METADATA_TOPIC_ID) and not str(fresh).startswith("-")


@pytest.mark.parametrize(
    ("raw", "error", "match"),
    [
        (b"", CorruptRecordError, "apiKey"),
        (b"\x04\x00", InvalidRecordError, "apiKey: 4 is not supported"),
        (b"\x02\x01", InvalidRecordError, "Can't read version 1 of RemotePartitionDeleteMetadataRecord"),
        (b"\x00\x02", InvalidRecordError, "Can't read version 2 of RemoteLogSegmentMetadataRecord"),
        (b"\xff\xff\xff\xff\xff\xff", CorruptRecordError, "not a valid unsigned varint"),
        (SEGMENT_VECTOR[:-1], CorruptRecordError, "runs past the end"),
        (SEGMENT_VECTOR + b"\x00", CorruptRecordError, "trailing bytes"),
        (b"\x02\x00\x00" + bytes(40), CorruptRecordError, "non-nullable field Name was serialized as null"),
        (b"\x02\x00\x02\xff" + bytes(40), InvalidRecordError, "not valid UTF-8"),
        (DELETE_VECTOR[:-2] + b"\x09\x00", InvalidRecordError, "unknown RemotePartitionDeleteState id 9"),
        (UPDATE_VECTOR[:-2] + b"\x04\x00", InvalidRecordError, "unknown RemoteLogSegmentState id 4"),
        (UPDATE_VECTOR[:-1] + b"\x02\x05\x00\x01\x00", CorruptRecordError, "out of order"),
        (UPDATE_VECTOR[:-1] + b"\xff\xff\xff\xff\x0f", CorruptRecordError, "tagged fields in"),
        (UPDATE_VECTOR[:-1] + b"\x01\x00\xff\xff\xff\xff\x0f", CorruptRecordError, "needs 4294967295 bytes"),
    ],
)
def test_hostile_bytes_raise_typed_errors(raw: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        deserialize(raw)


def test_huge_array_count_is_refused_before_allocating() -> None:
    head = SEGMENT_VECTOR.index(bytes.fromhex("0300000002"))
    raw = SEGMENT_VECTOR[:head] + b"\xff\xff\xff\xff\x0f" + SEGMENT_VECTOR[head + 1 :]
    with pytest.raises(CorruptRecordError, match="SegmentLeaderEpochs claims 4294967294 entries"):
        deserialize(raw)


def test_out_of_range_fields_are_typed_errors() -> None:
    with pytest.raises(InvalidRecordError, match="cannot encode RemoteLogSegmentMetadataUpdate"):
        serialize(
            RemoteLogSegmentMetadataUpdate(
                SEGMENT_ID, 0, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2**31
            )
        )
    with pytest.raises(InvalidRecordError, match="unknown RemoteLogSegmentState id 7"):
        RemoteLogSegmentMetadataUpdate(SEGMENT_ID, 0, None, 7, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="unknown RemotePartitionDeleteState id 3"):
        RemotePartitionDeleteMetadata(TP, 3, 0, 0)  # type: ignore[arg-type]


def test_values_kafka_constructors_refuse_are_invalid() -> None:
    entry = bytes.fromhex("0200000000000000000000000000")
    at = SNAPSHOT_VECTOR.rindex(entry)
    no_epochs = SNAPSHOT_VECTOR[:at] + b"\x01" + SNAPSHOT_VECTOR[at + len(entry) :]
    with pytest.raises(InvalidRecordError, match="segmentLeaderEpochs can not be null or empty"):
        deserialize(no_epochs)
    with pytest.raises(InvalidRecordError, match="StartOffset for a remote segment cannot be negative"):
        RemoteLogSegmentMetadata(SEGMENT_ID, -1, 9, 0, 0, 0, 1, ((0, 0),))
    with pytest.raises(InvalidRecordError, match="Unexpected end offset"):
        RemoteLogSegmentMetadata(SEGMENT_ID, 10, 9, 0, 0, 0, 1, ((0, 0),))


_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_uuids = st.builds(Uuid, _int64, _int64)
_tps = st.builds(TopicIdPartition, _uuids, st.text(max_size=20), _int32)
_ids = st.builds(RemoteLogSegmentId, _tps, _uuids)


@st.composite
def _segments(draw: st.DrawFn) -> RemoteLogSegmentMetadata:
    start = draw(st.integers(0, 2**62))
    end = draw(st.integers(start, 2**63 - 1))
    epochs = draw(st.lists(st.tuples(_int32, _int64), min_size=1, max_size=5))
    return RemoteLogSegmentMetadata(
        draw(_ids), start, end, draw(_int64), draw(_int32), draw(_int64), draw(st.integers(0, 2**31 - 1)),
        tuple(epochs), draw(st.none() | st.binary(max_size=40)), draw(st.sampled_from(RemoteLogSegmentState)),
    )  # fmt: skip


_values = (
    _segments()
    | st.builds(
        RemoteLogSegmentMetadataUpdate,
        _ids,
        _int64,
        st.none() | st.binary(max_size=40),
        st.sampled_from(RemoteLogSegmentState),
        _int32,
    )
    | st.builds(
        RemotePartitionDeleteMetadata, _tps, st.sampled_from(RemotePartitionDeleteState), _int64, _int32
    )
)


@settings(max_examples=200, deadline=None)
@given(_values)
def test_round_trip(value: RemoteLogSegmentMetadata) -> None:
    assert deserialize(serialize(value)) == value


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([SEGMENT_VECTOR, UPDATE_VECTOR, DELETE_VECTOR, SNAPSHOT_VECTOR]), st.data())
def test_mutated_bytes_decode_or_raise_typed_errors(raw: bytes, data: st.DataObject) -> None:
    """Flip, cut or extend a valid value anywhere: the decoder answers a value or a typed error, nothing else."""
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    mutated = bytes(buf[:cut]) + data.draw(st.binary(max_size=8))
    try:
        deserialize(mutated)
    except (CorruptRecordError, InvalidRecordError):
        pass
