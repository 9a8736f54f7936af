"""Partition directory names (Kafka's ``LocalLog.logDirName`` / ``parseTopicPartitionName``) and topic names.

* ``<topic>-<partition>``: a live partition (split at the **last** ``-``; the partition is ASCII digits up to
  ``2**31 - 1``, or the name is not a partition directory's).
* ``<topic>-<partition>.<uuid32hex>-delete``: scheduled for deletion; ``-future``: the target of a move
  between log dirs; ``-stray``: a replica kept aside. The total name is capped at 255 characters by
  shortening the topic.
* A topic name is 1-249 characters of ``[a-zA-Z0-9._-]`` and not ``.`` or ``..`` (Kafka's ``Topic.validate``),
  so no topic can name a path outside the data directory.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Final, NamedTuple

from kafkalog.errors import InvalidTopicError, KafkaError

__all__ = [
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "MAX_PARTITION",
    "MAX_TOPIC_NAME_LENGTH",
    "STRAY_DIR_SUFFIX",
    "TopicPartition",
    "log_delete_dir_name",
    "log_dir_name",
    "log_future_dir_name",
    "log_stray_dir_name",
    "parse_topic_partition_name",
    "validate_topic_name",
]

DELETE_DIR_SUFFIX: Final = "-delete"
FUTURE_DIR_SUFFIX: Final = "-future"
STRAY_DIR_SUFFIX: Final = "-stray"
MAX_TOPIC_NAME_LENGTH: Final = 249
#: The largest partition number (Kafka's partitions are Java ints).
MAX_PARTITION: Final = 2**31 - 1
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
_SUFFIXED = re.compile(r"^(\S+)-(\S+)\.(\S+)(-delete|-future|-stray)$")


class TopicPartition(NamedTuple):
    """A topic and a partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def validate_topic_name(topic: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``topic`` is a legal Kafka topic name."""
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError('topic name cannot be "." or ".."')
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {topic!r}"
        )
    if not _LEGAL.match(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


def log_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>``."""
    return f"{tp.topic}-{tp.partition}"


def _suffixed(tp: TopicPartition, suffix: str) -> str:
    uid = uuid.uuid4().hex
    tail = f"-{tp.partition}.{uid}{suffix}"
    prefix_len = min(len(tp.topic), 255 - len(tail))
    return tp.topic[:prefix_len] + tail


def log_delete_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<uuid>-delete`` (at most 255 characters)."""
    return _suffixed(tp, DELETE_DIR_SUFFIX)


def log_future_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<uuid>-future``."""
    return _suffixed(tp, FUTURE_DIR_SUFFIX)


def log_stray_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<uuid>-stray``."""
    return _suffixed(tp, STRAY_DIR_SUFFIX)


def parse_topic_partition_name(directory: Path | str) -> TopicPartition:
    """The topic and partition a partition directory belongs to (suffixes stripped)."""
    if directory is None:
        raise KafkaError("dir should not be null")
    name = Path(directory).name
    if not name or "-" not in name:
        raise KafkaError(
            f"found directory {directory}, '{name}' is not in the form of topic-partition or "
            "topic-partition.uniqueId-delete (if marked for deletion)"
        )
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        m = _SUFFIXED.match(name)
        if m is None:
            raise KafkaError(f"found directory {directory}, '{name}' has an invalid suffixed name")
        name = name[: name.rindex(".")]
    idx = name.rindex("-")
    topic, partition = name[:idx], name[idx + 1 :]
    # ASCII digits that fit Kafka's int32 (Integer.parseInt): "t-\u0661" is not partition 1 of "t", and
    # "t-99999999999999999999" is no partition at all.
    if not topic or not (partition.isascii() and partition.isdigit()) or int(partition) > MAX_PARTITION:
        raise KafkaError(
            f"found directory {directory}, '{name}' is not in the form of topic-partition or "
            "topic-partition.uniqueId-delete (if marked for deletion)"
        )
    return TopicPartition(topic, int(partition))
