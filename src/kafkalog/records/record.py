"""Value types for records: :class:`Record`, :class:`Header`, :class:`SimpleRecord`, :class:`TimestampType`.

A :class:`Record` is what a reader gets back: its absolute offset, its timestamp (already resolved: for a
``LogAppendTime`` batch every record carries the batch's max timestamp, as in Kafka), key, value (``None``
for null, which for a value is a tombstone) and headers. Header keys are ``str`` (Kafka forbids null
header keys); header values are bytes or ``None``.

A :class:`SimpleRecord` is what a writer hands in: no offset (the log assigns it), optional timestamp
(``None`` means "now" when the batch is built).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["NO_TIMESTAMP", "Header", "Record", "SimpleRecord", "TimestampType"]

#: Kafka's ``RecordBatch.NO_TIMESTAMP``.
NO_TIMESTAMP = -1


class TimestampType(enum.IntEnum):
    """Kafka's ``TimestampType``; the value is Kafka's id (``-1``, ``0``, ``1``)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        """``NoTimestampType``, ``CreateTime`` or ``LogAppendTime``, as Kafka prints it."""
        return _TS_NAMES[self]

    @classmethod
    def from_name(cls, name: str | TimestampType) -> TimestampType:
        """Parse ``CreateTime`` / ``LogAppendTime`` (case-insensitive, ``_`` and ``-`` ignored)."""
        if isinstance(name, TimestampType):
            return name
        key = name.replace("_", "").replace("-", "").lower()
        for ts_type, text in _TS_NAMES.items():
            if text.lower() == key:
                return ts_type
        raise ValueError(f"unknown timestamp type {name!r}")


_TS_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class Header(NamedTuple):
    """A record header: a ``str`` key (never null) and a nullable ``bytes`` value."""

    key: str
    value: bytes | None


class Record(NamedTuple):
    """One record as stored in the log: absolute offset, resolved timestamp, key, value, headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class SimpleRecord(NamedTuple):
    """A record to write: value, optional key, timestamp (``None`` = now) and headers."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: tuple[Header, ...] | tuple[tuple[str, bytes | None], ...] = ()
