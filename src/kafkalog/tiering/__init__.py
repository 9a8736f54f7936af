"""Tiered storage for kafkalog's own logs (KIP-405): Kafka's ``RemoteStorageManager``, the topic-based remote
log metadata manager and the ``RemoteLogManager``.

* :mod:`~kafkalog.tiering.config`: :class:`RemoteLogManagerConfig` (Kafka's ``remote.log.*`` names and the
  Aiven plugin's ``rsm.config.*``);
* :mod:`~kafkalog.tiering.rsm`: :class:`RemoteStorageManager`, :class:`LogSegmentData`, :class:`IndexType`
  and :class:`AivenRemoteStorageManager` (the Aiven plugin's layout over an ObjectStore, which
  :mod:`kafkalog.tiered` reads);
* :mod:`~kafkalog.tiering.rlmm`: :class:`TopicBasedRemoteLogMetadataManager` (``__remote_log_metadata`` kept as
  ordinary Logs of the data directory);
* :mod:`~kafkalog.tiering.index_cache`: :class:`RemoteIndexCache` (fetched remote indexes, bounded in bytes);
* :mod:`~kafkalog.tiering.quota`: :class:`RLMQuotaManager` (Kafka's copy and fetch quotas: a sampled byte
  rate) and :class:`ThrottleTimeSensor` (``remote-fetch-throttle-time``);
* :mod:`~kafkalog.tiering.reader_pool`: :class:`RemoteStorageThreadPool` (the bounded pool of remote reads for
  fetches: ``remote.log.reader.threads``, ``remote.log.reader.max.pending.tasks``);
* :mod:`~kafkalog.tiering.rlm`: :class:`RemoteLogManager` (copy, expiration, cleanup, reads) and
  :class:`RemoteTierReader` (the :class:`~kafkalog.log.tiers.RemoteLogReader` a Log falls through to).

Layering: beside ``cleaner`` and ``readonly``; imports ``tiered``, ``remote``, ``log``, ``storage``,
``objstore``, ``records``; the manager imports it. Its only threads are the remote reader pool's, started by
the first ``RemoteLogManager.async_read`` (``kafkalog serve``'s remote fetches) and stopped by ``close``.
"""

from kafkalog.tiering.config import RemoteLogManagerConfig, RsmConfig
from kafkalog.tiering.index_cache import RemoteIndexCache, RemoteIndexEntry
from kafkalog.tiering.quota import RLMQuotaManager, ThrottleTimeSensor
from kafkalog.tiering.reader_pool import RemoteStorageThreadPool
from kafkalog.tiering.rlm import (
    METRIC_NAMES,
    QUOTA_WAIT_MS,
    READ_METRIC_NAMES,
    RemoteLogManager,
    RemoteTierReader,
    topic_id_partition,
)
from kafkalog.tiering.rlmm import TopicBasedRemoteLogMetadataManager
from kafkalog.tiering.rsm import AivenRemoteStorageManager, IndexType, LogSegmentData, RemoteStorageManager

__all__ = [
    "METRIC_NAMES",
    "QUOTA_WAIT_MS",
    "READ_METRIC_NAMES",
    "AivenRemoteStorageManager",
    "IndexType",
    "LogSegmentData",
    "RLMQuotaManager",
    "RemoteIndexCache",
    "RemoteIndexEntry",
    "RemoteLogManager",
    "RemoteLogManagerConfig",
    "RemoteStorageManager",
    "RemoteStorageThreadPool",
    "RemoteTierReader",
    "RsmConfig",
    "ThrottleTimeSensor",
    "TopicBasedRemoteLogMetadataManager",
    "topic_id_partition",
]
