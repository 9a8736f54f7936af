"""Metrics of logs, readable in process and exportable to Prometheus.

Invariant owned here: the metric names and labels are Kafka's ``kafka.log:type=Log`` MBeans
(``name=NumLogSegments|LogStartOffset|LogEndOffset|Size``, labels ``topic`` and ``partition``) as the
Prometheus JMX exporter renders them (``kafka_log_log_<name lower-cased>``), so dashboards built for Kafka
brokers work unchanged. Values are read when scraped (no background sampling): a scrape sees the logs as
they are at that moment; a log that is offline or closed is skipped rather than failing the scrape.

Tiered storage (a LogManager with ``remote.log.storage.system.enable``): Kafka's remote storage metrics of each
tiered partition (``kafka.server:type=BrokerTopicMetrics``, ``name=RemoteCopyBytesPerSec|RemoteFetchBytesPerSec|
RemoteCopyLagBytes|RemoteLogSizeBytes|...``, labels ``topic`` and ``partition``), rendered
``kafka_server_brokertopicmetrics_<name lower-cased>`` (gauges; a ``*PerSec`` meter's value is its count since
the manager opened). :func:`remote_snapshot` returns them in process.

In process: :func:`snapshot` returns ``{(topic, partition): {"num_log_segments": .., ...}}``.
Prometheus (optional extra ``kafkalog[metrics]``): ``register_prometheus(manager)`` adds a collector to
``prometheus_client``'s registry; serve it with ``prometheus_client.start_http_server(port)``.

The remote tier's metrics (``register_remote_prometheus(remote_log_manager)``) are Kafka's
``kafka.server:type=BrokerTopicMetrics`` ones of each managed partition: a meter (``*PerSec``) renders one
series per JMX attribute, ``kafka_server_brokertopicmetrics_<name>_count`` / ``_meanrate`` /
``_oneminuterate`` / ``_fiveminuterate`` / ``_fifteenminuterate``, a gauge one
``kafka_server_brokertopicmetrics_<name>`` (names lower-cased; labels ``topic`` and ``partition``). Broker-wide,
the remote reads of ``kafkalog serve``'s fetches (:data:`~kafkalog.tiering.rlm.READ_METRIC_NAMES`): Kafka's
``kafka.server:type=RemoteLogManager`` sensor ``remote-fetch-throttle-time-avg`` / ``-max`` rendered
``kafka_server_remotelogmanager_remote_fetch_throttle_time_avg`` / ``_max`` (and the kafkalog count
``..._remote_fetch_throttle_count``), the same of ``remote-copy-throttle-time`` (the copy quota's waits),
and ``kafka.log.remote:type=RemoteStorageThreadPool,
name=RemoteLogReaderTaskQueueSize`` rendered ``kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize``,
and the counts of ``kafka.server:type=DelayedRemoteFetchMetrics`` / ``DelayedRemoteListOffsetsMetrics``
``name=ExpiresPerSec`` (``kafka_server_delayedremotefetchmetrics_expirespersec_count``, ...);
``register_prometheus(manager)`` exports them too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kafkalog.errors import KafkaError
from kafkalog.log.names import TopicPartition

if TYPE_CHECKING:
    from kafkalog.log.log import Log
    from kafkalog.manager import LogManager
    from kafkalog.tiering import RemoteLogManager

__all__ = ["METRICS", "register_prometheus", "register_remote_prometheus", "remote_snapshot", "snapshot"]

#: (key in Log.metrics, Kafka MBean name, help text)
METRICS: tuple[tuple[str, str, str], ...] = (
    ("num_log_segments", "NumLogSegments", "Number of segments of the partition log"),
    ("log_start_offset", "LogStartOffset", "First offset of the partition log"),
    ("log_end_offset", "LogEndOffset", "Offset of the next record appended to the partition log"),
    ("size", "Size", "Size of the partition log in bytes"),
)

LogSource = Callable[[], Mapping[TopicPartition, "Log"]]


def _source(target: LogManager | Mapping[TopicPartition, Log] | LogSource) -> LogSource:
    if callable(target) and not hasattr(target, "all_logs"):
        return target
    all_logs = getattr(target, "all_logs", None)
    if all_logs is not None:
        return all_logs  # type: ignore[no-any-return]
    logs = target
    return lambda: logs  # type: ignore[return-value]


def snapshot(
    target: LogManager | Mapping[TopicPartition, Log] | LogSource,
) -> dict[TopicPartition, dict[str, int]]:
    """Every log's metrics now, keyed by topic-partition (offline or closed logs are left out)."""
    out: dict[TopicPartition, dict[str, int]] = {}
    for tp, log in sorted(_source(target)().items()):
        if log.closed or log.local_log.offline:
            continue
        try:
            out[tp] = log.metrics()
        except (KafkaError, OSError):
            continue
    return out


def remote_snapshot(target: object) -> dict[TopicPartition, dict[str, int]]:
    """Kafka's remote storage metrics of every tiered partition of ``target`` (a LogManager with tiering;
    anything else: empty), keyed by topic-partition."""
    remote = getattr(target, "remote_tier", None)
    all_logs = getattr(target, "all_logs", None)
    if remote is None or all_logs is None:
        return {}
    out: dict[TopicPartition, dict[str, int]] = {}
    for tp in sorted(all_logs()):
        if remote.is_started(tp):
            out[tp] = dict(remote.metrics(tp))
    return out


class _Collector:
    def __init__(self, source: LogSource, target: object = None) -> None:
        self._source = source
        self._target = target

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        values = snapshot(self._source)
        for key, mbean, doc in METRICS:
            family = GaugeMetricFamily(f"kafka_log_log_{mbean.lower()}", doc, labels=["topic", "partition"])
            for tp, metrics in values.items():
                family.add_metric([tp.topic, str(tp.partition)], float(metrics[key]))
            yield family
        remote = remote_snapshot(self._target)
        names = sorted({name for metrics in remote.values() for name in metrics})
        for name in names:
            base = f"kafka_server_brokertopicmetrics_{name.lower()}"
            doc = f"Kafka's BrokerTopicMetrics {name} of the partition's remote tier"
            if name.endswith("PerSec"):
                doc += " (a meter: its count since the manager opened)"
            family = GaugeMetricFamily(base, doc, labels=["topic", "partition"])
            for tp, metrics in remote.items():
                family.add_metric([tp.topic, str(tp.partition)], float(metrics.get(name, 0)))
            yield family
        tier = getattr(self._target, "remote_tier", None)
        if tier is not None:
            yield from _read_families(tier.rlm)


def _read_families(rlm: RemoteLogManager) -> Iterator[Any]:
    """The broker-wide gauges of the remote reads serving fetches (module doc)."""
    from prometheus_client.core import GaugeMetricFamily

    for name, value in rlm.read_metrics().items():
        yield GaugeMetricFamily(
            _READ_PROMETHEUS[name], f"{name} of the remote reads serving fetches", value=value
        )


#: The Prometheus name of each remote read metric (Kafka's MBean as the JMX exporter renders it).
_READ_PROMETHEUS: dict[str, str] = {
    "remote-fetch-throttle-time-avg": "kafka_server_remotelogmanager_remote_fetch_throttle_time_avg",
    "remote-fetch-throttle-time-max": "kafka_server_remotelogmanager_remote_fetch_throttle_time_max",
    "remote-fetch-throttle-count": "kafka_server_remotelogmanager_remote_fetch_throttle_count",
    "remote-copy-throttle-time-avg": "kafka_server_remotelogmanager_remote_copy_throttle_time_avg",
    "remote-copy-throttle-time-max": "kafka_server_remotelogmanager_remote_copy_throttle_time_max",
    "remote-copy-throttle-count": "kafka_server_remotelogmanager_remote_copy_throttle_count",
    "RemoteLogReaderTaskQueueSize": "kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize",
    "DelayedRemoteFetchExpiresPerSec": "kafka_server_delayedremotefetchmetrics_expirespersec_count",
    "DelayedRemoteListOffsetsExpiresPerSec": "kafka_server_delayedremotelistoffsetsmetrics_expirespersec_count",
}


def register_prometheus(
    target: LogManager | Mapping[TopicPartition, Log] | LogSource, registry: Any = None
) -> Any:
    """Register a collector for the logs of ``target`` with ``registry`` (prometheus_client's default one if
    None); returns the collector (``registry.unregister(collector)`` removes it). Needs ``prometheus-client``."""
    try:
        from prometheus_client import REGISTRY
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the Prometheus exporter needs prometheus-client: pip install 'kafkalog[metrics]'"
        ) from exc
    collector = _Collector(_source(target), target)
    (registry if registry is not None else REGISTRY).register(collector)
    return collector


class _RemoteCollector:
    def __init__(self, rlm: RemoteLogManager) -> None:
        self._rlm = rlm

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from kafkalog.meter import METER_ATTRIBUTES
        from kafkalog.tiering.rlm import GAUGE_NAMES, METER_NAMES

        rows = []
        for tp in self._rlm.partitions():
            labels = [tp.topic, str(tp.partition)]
            rows.append((labels, self._rlm.meters(tp), self._rlm.gauges(tp)))
        prefix = "kafka_server_brokertopicmetrics_"
        for name in METER_NAMES:
            for attribute in METER_ATTRIBUTES:
                family = GaugeMetricFamily(
                    f"{prefix}{name.lower()}_{attribute.lower()}",
                    f"{name} ({attribute}) of the partition's remote storage",
                    labels=["topic", "partition"],
                )
                for labels, meters, _ in rows:
                    family.add_metric(labels, float(meters[name].attributes()[attribute]))
                yield family
        for name in GAUGE_NAMES:
            family = GaugeMetricFamily(
                f"{prefix}{name.lower()}",
                f"{name} of the partition's remote storage",
                labels=["topic", "partition"],
            )
            for labels, _, gauges in rows:
                family.add_metric(labels, float(gauges[name]))
            yield family
        yield from _read_families(self._rlm)


def register_remote_prometheus(rlm: RemoteLogManager, registry: Any = None) -> Any:
    """Register a collector of ``rlm``'s remote storage meters and gauges (see the module docstring) with
    ``registry`` (prometheus_client's default one if None); returns the collector. Needs ``prometheus-client``."""
    try:
        from prometheus_client import REGISTRY
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the Prometheus exporter needs prometheus-client: pip install 'kafkalog[metrics]'"
        ) from exc
    collector = _RemoteCollector(rlm)
    (registry if registry is not None else REGISTRY).register(collector)
    return collector
