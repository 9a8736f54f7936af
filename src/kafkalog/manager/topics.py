"""The topics of a data directory: names, partition counts, config overrides, topic ids.

Invariants owned here: every topic name is validated as Kafka validates it (``[a-zA-Z0-9._-]``, 1 to 249
characters, not ``.`` or ``..``) before it is registered, so no name can build a path outside the data
directory; two names that differ only by ``.`` versus ``_`` cannot coexist (Kafka refuses them: they
collide in metric names); partition counts only grow, except when the manager puts back the count of a
creation that failed half way or corrects a stored count to the partitions found on disk; config overrides are validated against
:class:`~kafkalog.log.config.LogConfig` and Kafka's tiered-storage checks (with the broker's
``remote.log.storage.system.enable``: ``remote_storage_system_enable``) before they are stored, so a refused
change leaves the registry as it was. The registry is the in-memory form of ``kafkalog-topics.json`` (:mod:`kafkalog.datadir`);
persisting it is the :class:`~kafkalog.manager.LogManager`'s job, after every change.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalog.datadir import TopicMetadata, TopicsDocument
from kafkalog.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log.checkpoint import topic_id_from_string, topic_id_to_string
from kafkalog.log.config import LogConfig, validate_remote_storage, validate_remote_storage_change
from kafkalog.log.names import TopicPartition, validate_topic_name

__all__ = ["TopicRegistry", "check_partition_count", "normalize_overrides"]


def check_partition_count(partitions: object) -> None:
    """A partition count must be a positive int (:class:`InvalidPartitionsError` otherwise)."""
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions <= 0:
        raise InvalidPartitionsError(f"number of partitions must be larger than 0, got {partitions!r}")


def normalize_overrides(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Topic overrides as JSON-friendly dotted names (lists become Kafka's comma-separated strings)."""
    out: dict[str, Any] = {}
    for key, value in (config or {}).items():
        if not isinstance(key, str):
            raise InvalidConfigurationError(f"config names must be strings, got {key!r}")
        out[key] = ",".join(value) if isinstance(value, tuple | list) else value
    return out


class TopicRegistry:
    """Topics known to a data directory (see the module doc). Not thread-safe: the manager locks."""

    def __init__(
        self,
        default_config: LogConfig,
        hw_follows_leo: bool = True,
        remote_storage_system_enable: bool = False,
    ) -> None:
        self.default_config = default_config
        #: the broker's ``remote.log.storage.system.enable``: Kafka's tiered-storage gate for topic configs
        self.remote_storage_system_enable = remote_storage_system_enable
        self.document = TopicsDocument(hw_follows_leo=hw_follows_leo)

    def load(self, documents: Iterable[TopicsDocument]) -> bool:
        """Adopt the newest of the documents found in the log dirs; False if there was none."""
        docs = list(documents)
        if not docs:
            return False
        newest = max(docs, key=lambda doc: doc.generation)
        self.document = TopicsDocument(dict(newest.topics), newest.generation, self.document.hw_follows_leo)
        return True

    def names(self) -> list[str]:
        """Every topic, sorted."""
        return sorted(self.document.topics)

    def __contains__(self, topic: object) -> bool:
        return topic in self.document.topics

    def __len__(self) -> int:
        return len(self.document.topics)

    def get(self, topic: str) -> TopicMetadata:
        """The topic's metadata; :class:`UnknownTopicOrPartitionError` if there is no such topic."""
        meta = self.document.topics.get(topic)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        return meta

    def config_for(self, topic: str) -> LogConfig:
        """The effective config: defaults plus the topic's overrides (defaults for an unknown topic)."""
        meta = self.document.topics.get(topic)
        if meta is None or not meta.config:
            return self.default_config
        return self.default_config.updated(meta.config)

    def topic_uuid(self, topic: str) -> uuid.UUID | None:
        """The topic id, if the topic has one."""
        meta = self.document.topics.get(topic)
        if meta is None or meta.topic_id is None:
            return None
        return topic_id_from_string(meta.topic_id)

    def check_new(
        self, name: str, partitions: int, config: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Validate a new topic's name, partition count and config without registering it; its overrides."""
        validate_topic_name(name)
        check_partition_count(partitions)
        overrides = normalize_overrides(config)
        validate_remote_storage(
            LogConfig.from_props(overrides, base=self.default_config), self.remote_storage_system_enable
        )
        if name in self.document.topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        for other in self.document.topics:
            if other.replace(".", "_") == name.replace(".", "_"):
                raise InvalidConfigurationError(
                    f"topic {name!r} collides with existing topic {other!r} ('.' and '_' collide in metric names)"
                )
        return overrides

    def register(self, name: str, partitions: int, config: Mapping[str, Any] | None = None) -> TopicMetadata:
        """Add a new topic after validating its name, partition count and config (:meth:`check_new`)."""
        overrides = self.check_new(name, partitions, config)
        meta = TopicMetadata(partitions, overrides, topic_id_to_string(uuid.uuid4()))
        self.document.topics[name] = meta
        return meta

    def total_partitions(self) -> int:
        """The partitions of every topic together."""
        return sum(meta.partitions for meta in self.document.topics.values())

    def infer(self, tp: TopicPartition) -> bool:
        """Account for a partition directory found on disk; True if the registry changed."""
        meta = self.document.topics.get(tp.topic)
        if meta is None:
            self.document.topics[tp.topic] = TopicMetadata(tp.partition + 1)
            return True
        if tp.partition >= meta.partitions:
            meta.partitions = tp.partition + 1
            return True
        return False

    def check_growth(self, topic: str, total: int) -> int:
        """Validate raising the partition count to ``total`` without doing it; the current count."""
        meta = self.get(topic)
        if not isinstance(total, int) or isinstance(total, bool) or total <= meta.partitions:
            raise InvalidPartitionsError(
                f"topic {topic!r} currently has {meta.partitions} partitions, {total!r} would not be an increase"
            )
        return meta.partitions

    def grow(self, topic: str, total: int) -> int:
        """Raise the partition count to ``total`` (:meth:`check_growth`); returns the old count."""
        old = self.check_growth(topic, total)
        self.document.topics[topic].partitions = total
        return old

    def set_partitions(self, topic: str, count: int) -> None:
        """Put back a count (a creation that failed half way, or the partitions found on disk)."""
        self.get(topic).partitions = count

    def altered(self, topic: str, changes: Mapping[str, Any]) -> tuple[dict[str, Any], LogConfig]:
        """The overrides and the effective config ``changes`` would give ``topic`` (a None value removes an
        override), validated as :meth:`alter` does; nothing changes."""
        meta = self.get(topic)
        overrides = dict(meta.config)
        for key, value in changes.items():
            if value is None:
                overrides.pop(key, None)
            else:
                overrides.update(normalize_overrides({key: value}))
        new_config = LogConfig.from_props(overrides, base=self.default_config)
        validate_remote_storage(new_config, self.remote_storage_system_enable)
        validate_remote_storage_change(self.config_for(topic), new_config)
        return overrides, new_config

    def alter(self, topic: str, changes: Mapping[str, Any]) -> LogConfig:
        """Set overrides (a None value removes one); returns the new effective config."""
        overrides, new_config = self.altered(topic, changes)
        self.get(topic).config = overrides
        return new_config

    def remove(self, topic: str) -> None:
        """Forget a topic."""
        self.get(topic)
        del self.document.topics[topic]

    def next_generation(self, hw_follows_leo: bool) -> TopicsDocument:
        """The document to persist after a change (its generation incremented)."""
        self.document.generation += 1
        self.document.hw_follows_leo = hw_follows_leo
        return self.document
