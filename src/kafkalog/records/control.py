"""Control records: transaction markers and the other control types Kafka writes.

A control batch has attributes ``isControl`` (0x20) and, for transaction markers, ``isTransactional``
(0x10); it is uncompressed, has base sequence -1 and exactly one record at offset delta 0.

Record key (``ControlRecordType``): ``version int16 (0) · type int16``; types 0 ABORT, 1 COMMIT,
2 LEADER_CHANGE, 3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS; any other type
reads as UNKNOWN. A key shorter than 4 bytes or with a negative version is an
:class:`~kafkalog.errors.InvalidRecordError`.

End-transaction marker value (``EndTransactionMarker``): ``version int16 (0) · coordinatorEpoch int32``
(at least 6 bytes; higher versions are read as version 0).
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from kafkalog.errors import InvalidRecordError

__all__ = ["ControlRecordType", "EndTransactionMarker"]

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """Type of a control record (the int16 in its key); ``UNKNOWN`` stands for any other id."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    def record_key(self) -> bytes:
        """The 4-byte key Kafka writes for this type (version 0)."""
        if self is ControlRecordType.UNKNOWN:
            raise ValueError("cannot write an UNKNOWN control record")
        return _KEY.pack(0, int(self))

    @classmethod
    def parse(cls, key: bytes | None) -> ControlRecordType:
        """The type named by a control record's key."""
        if key is None or len(key) < 4:
            raise InvalidRecordError(
                f"invalid control record key: expected at least 4 bytes, got {0 if key is None else len(key)}"
            )
        version, type_id = _KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"invalid version found for control record: {version}")
        try:
            return cls(type_id) if type_id >= 0 else cls.UNKNOWN
        except ValueError:
            return cls.UNKNOWN


class EndTransactionMarker(NamedTuple):
    """A COMMIT or ABORT marker and the coordinator epoch that wrote it."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def value_bytes(self) -> bytes:
        """The marker record's value (version 0)."""
        return _MARKER_VALUE.pack(0, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        """Read a marker from a control record's key and value."""
        control_type = ControlRecordType.parse(key)
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise InvalidRecordError(f"invalid control type for end transaction marker: {control_type.name}")
        if value is None or len(value) < _MARKER_VALUE.size:
            raise InvalidRecordError("invalid end transaction marker value: expected at least 6 bytes")
        version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
        if version < 0:
            raise InvalidRecordError(f"invalid version found for end transaction marker: {version}")
        return cls(control_type, coordinator_epoch)
