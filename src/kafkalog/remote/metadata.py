"""The value types of Kafka's remote log metadata (``org.apache.kafka.server.log.remote.storage``).

Invariants, as Kafka's constructors enforce them (a violation is an
:class:`~kafkalog.errors.InvalidRecordError`): a :class:`Uuid` is two signed 64-bit halves and prints as Kafka's
22-character unpadded base64url text; a :class:`RemoteLogSegmentMetadata` has ``start_offset >= 0``,
``end_offset >= start_offset``, ``segment_size_in_bytes >= 0`` and at least one
``(leader_epoch, start_offset)`` entry, kept sorted by epoch with one entry per epoch (Kafka's ``TreeMap``).
:class:`RemoteLogSegmentState` and :class:`RemotePartitionDeleteState` carry Kafka's ids and
``is_valid_transition`` rules (a state may repeat itself, for idempotent retries).
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import ClassVar, Final

from kafkalog.errors import InvalidRecordError

__all__ = [
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataSnapshot",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata",
    "RemotePartitionDeleteState",
    "TaggedFields",
    "TopicIdPartition",
    "Uuid",
]

#: Kafka's ``Uuid.toString``: 22 base64url characters; ``fromString`` also takes the padded 24-character form.
_UUID_TEXT: Final = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1

#: Tagged fields a decoder did not know, ``(tag, raw bytes)`` in ascending tag order; re-encoded unchanged.
TaggedFields = tuple[tuple[int, bytes], ...]


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidRecordError(f"{name} {value} is out of range [{low}, {high}]")


@dataclass(frozen=True, slots=True, order=True)
class Uuid:
    """Kafka's ``Uuid``: two signed 64-bit halves; ``str()`` is the unpadded base64url of their 16 bytes."""

    most_significant_bits: int
    least_significant_bits: int

    ZERO_UUID: ClassVar[Uuid]
    METADATA_TOPIC_ID: ClassVar[Uuid]

    def __post_init__(self) -> None:
        _check_int("uuid half", self.most_significant_bits, _INT64_MIN, _INT64_MAX)
        _check_int("uuid half", self.least_significant_bits, _INT64_MIN, _INT64_MAX)

    @classmethod
    def from_bytes(cls, raw: bytes) -> Uuid:
        """The uuid of 16 big-endian bytes (most significant half first), as Kafka writes it."""
        if len(raw) != 16:
            raise InvalidRecordError(f"a uuid is 16 bytes, got {len(raw)}")
        return cls(int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True))

    def to_bytes(self) -> bytes:
        """The 16 big-endian bytes Kafka writes for this uuid."""
        return self.most_significant_bits.to_bytes(
            8, "big", signed=True
        ) + self.least_significant_bits.to_bytes(8, "big", signed=True)

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Kafka's ``Uuid.fromString``: 22 base64url characters (or 24 with ``==``) decoding to 16 bytes."""
        if _UUID_TEXT.fullmatch(text) is None:
            shown = text[:24] + ("…" if len(text) > 24 else "")
            raise InvalidRecordError(
                f"Unable to parse UUID string {shown!r}: expected 22 base64url characters"
            )
        # Like Java's decoder, the 4 unused low bits of the last character are ignored.
        return cls.from_bytes(base64.urlsafe_b64decode(text[:22] + "=="))

    @classmethod
    def random_uuid(cls) -> Uuid:
        """Kafka's ``Uuid.randomUuid``: random, never a reserved id and never printing with a leading ``-``."""
        while True:
            uuid = cls.from_bytes(secrets.token_bytes(16))
            if uuid not in (cls.ZERO_UUID, cls.METADATA_TOPIC_ID) and not str(uuid).startswith("-"):
                return uuid

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.to_bytes()).decode("ascii").rstrip("=")


Uuid.ZERO_UUID = Uuid(0, 0)
Uuid.METADATA_TOPIC_ID = Uuid(0, 1)


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """Kafka's ``TopicIdPartition``: a topic id with its name and a partition number."""

    topic_id: Uuid
    topic: str
    partition: int

    def __post_init__(self) -> None:
        _check_int("partition", self.partition, _INT32_MIN, _INT32_MAX)

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """Kafka's ``RemoteLogSegmentId``: the partition and a uuid naming one uploaded segment."""

    topic_id_partition: TopicIdPartition
    id: Uuid

    def __str__(self) -> str:
        return f"RemoteLogSegmentId{{topicIdPartition={self.topic_id_partition}, id={self.id}}}"


class RemoteLogSegmentState(IntEnum):
    """Kafka's ``RemoteLogSegmentState``, with its byte ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @classmethod
    def for_id(cls, state_id: int) -> RemoteLogSegmentState:
        """The state with Kafka's id ``state_id``; an unknown id is an :class:`InvalidRecordError`."""
        try:
            return cls(state_id)
        except ValueError:
            raise InvalidRecordError(f"unknown RemoteLogSegmentState id {state_id}") from None

    @staticmethod
    def is_valid_transition(src: RemoteLogSegmentState | None, target: RemoteLogSegmentState) -> bool:
        """Kafka's ``isValidTransition``: None → STARTED; a state to itself; COPY_STARTED → COPY_FINISHED or
        DELETE_STARTED; COPY_FINISHED → DELETE_STARTED; DELETE_STARTED → DELETE_FINISHED."""
        if src is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if src is target:
            return True
        return target in _SEGMENT_NEXT.get(src, ())


_SEGMENT_NEXT: Final[Mapping[RemoteLogSegmentState, tuple[RemoteLogSegmentState, ...]]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: (
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
    ),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: (RemoteLogSegmentState.DELETE_SEGMENT_STARTED,),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: (RemoteLogSegmentState.DELETE_SEGMENT_FINISHED,),
}


class RemotePartitionDeleteState(IntEnum):
    """Kafka's ``RemotePartitionDeleteState``, with its byte ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @classmethod
    def for_id(cls, state_id: int) -> RemotePartitionDeleteState:
        """The state with Kafka's id ``state_id``; an unknown id is an :class:`InvalidRecordError`."""
        try:
            return cls(state_id)
        except ValueError:
            raise InvalidRecordError(f"unknown RemotePartitionDeleteState id {state_id}") from None

    @staticmethod
    def is_valid_transition(
        src: RemotePartitionDeleteState | None, target: RemotePartitionDeleteState
    ) -> bool:
        """Kafka's ``isValidTransition``: None → MARKED; a state to itself; MARKED → STARTED → FINISHED."""
        if src is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return target is src or target - src == 1


def _leader_epochs(entries: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Entries keyed by epoch (a later duplicate wins, as Java's map ``put``), sorted by epoch."""
    by_epoch: dict[int, int] = {}
    for epoch, offset in entries:
        _check_int("leader epoch", epoch, _INT32_MIN, _INT32_MAX)
        _check_int("leader epoch start offset", offset, _INT64_MIN, _INT64_MAX)
        by_epoch[epoch] = offset
    return tuple(sorted(by_epoch.items()))


def _check_segment(
    start_offset: int, end_offset: int, size: int, epochs: tuple[tuple[int, int], ...]
) -> None:
    if start_offset < 0:
        raise InvalidRecordError(
            f"Unexpected start offset = {start_offset}. StartOffset for a remote segment cannot be negative"
        )
    if end_offset < start_offset:
        raise InvalidRecordError(
            f"Unexpected end offset = {end_offset}. EndOffset for a remote segment cannot be less than "
            f"startOffset = {start_offset}"
        )
    _check_int("end offset", end_offset, _INT64_MIN, _INT64_MAX)
    if not 0 <= size <= _INT32_MAX:
        raise InvalidRecordError(f"Unexpected segment size = {size}")
    if not epochs:
        raise InvalidRecordError("segmentLeaderEpochs can not be null or empty")


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """Kafka's ``RemoteLogSegmentMetadata``: one uploaded segment and its current state.

    ``segment_leader_epochs`` maps each leader epoch in the segment to its first offset, sorted by epoch.
    ``custom_metadata`` is the remote storage manager's opaque bytes (None when absent).
    """

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    unknown_tagged_fields: TaggedFields = field(default=(), compare=False)

    def __post_init__(self) -> None:
        epochs = _leader_epochs(self.segment_leader_epochs)
        object.__setattr__(self, "segment_leader_epochs", epochs)
        object.__setattr__(self, "state", RemoteLogSegmentState.for_id(self.state))
        _check_segment(self.start_offset, self.end_offset, self.segment_size_in_bytes, epochs)

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        """The partition this segment belongs to."""
        return self.remote_log_segment_id.topic_id_partition

    def create_with_updates(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """Kafka's ``createWithUpdates``: this segment with the update's broker, time, custom metadata and state."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise InvalidRecordError(
                f"Given rlsmUpdate does not have this instance's remoteLogSegmentId: {update.remote_log_segment_id}"
            )
        return replace(
            self,
            broker_id=update.broker_id,
            event_timestamp_ms=update.event_timestamp_ms,
            custom_metadata=update.custom_metadata,
            state=update.state,
        )


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    """Kafka's ``RemoteLogSegmentMetadataUpdate``: a state change of an uploaded segment."""

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    broker_id: int
    unknown_tagged_fields: TaggedFields = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RemoteLogSegmentState.for_id(self.state))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        """The partition of the updated segment."""
        return self.remote_log_segment_id.topic_id_partition


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    """Kafka's ``RemotePartitionDeleteMetadata``: a step of deleting a partition's remote data."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int
    unknown_tagged_fields: TaggedFields = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RemotePartitionDeleteState.for_id(self.state))


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataSnapshot:
    """Kafka's ``RemoteLogSegmentMetadataSnapshot``: a segment's metadata without its partition (snapshots are
    stored per partition)."""

    segment_id: Uuid
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    unknown_tagged_fields: TaggedFields = field(default=(), compare=False)

    def __post_init__(self) -> None:
        epochs = _leader_epochs(self.segment_leader_epochs)
        object.__setattr__(self, "segment_leader_epochs", epochs)
        object.__setattr__(self, "state", RemoteLogSegmentState.for_id(self.state))
        _check_segment(self.start_offset, self.end_offset, self.segment_size_in_bytes, epochs)
