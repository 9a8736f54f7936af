"""A topic partition's log: ``Log`` (state and policy) over ``LocalLog`` (segments on disk).

Public names::

    Log, LogConfig                      open a partition directory, append, read, retention, recovery
    AppendOrigin, FetchIsolation,       value types of appends and reads
    LogAppendInfo
    ProducerStateManager,               idempotent / transactional producer state
    LeaderEpochFileCache                leader epochs (leader-epoch-checkpoint)
    KafkaScheduler, MockScheduler       background tasks
    TopicPartition, parse_topic_partition_name, validate_topic_name
"""

from __future__ import annotations

from kafkalog.log.config import LogConfig
from kafkalog.log.leader_epoch import LeaderEpochFileCache
from kafkalog.log.local_log import LocalLog
from kafkalog.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from kafkalog.log.names import TopicPartition, parse_topic_partition_name, validate_topic_name
from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.log.scheduler import KafkaScheduler, MockScheduler, Scheduler
from kafkalog.log.types import AppendOrigin, FetchIsolation, LogAppendInfo

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "FetchIsolation",
    "KafkaScheduler",
    "LeaderEpochFileCache",
    "LocalLog",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "MockScheduler",
    "ProducerStateManager",
    "Scheduler",
    "TopicPartition",
    "parse_topic_partition_name",
    "validate_topic_name",
]
