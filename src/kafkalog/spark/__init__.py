"""PySpark data source ``kafkalog``: Spark's Kafka source and sink contract over Kafka log directories.

Usage::

    from kafkalog.spark import KafkaLogDataSource
    spark.dataSource.register(KafkaLogDataSource)       # or install kafkalog: pyspark_kafkalog registers it
    df = spark.read.format("kafkalog").option("subscribe", "orders").load("/data/kafka")

    kafkalog.spark.check_workers(spark)   # WorkerPythonError naming PYSPARK_PYTHON if workers lack kafkalog
    kafkalog.spark.register(spark)        # check_workers, then register
    spark.read.format("kafkalog").options(**kafkalog.spark.storage_options(spark)).load("s3://bucket/prefix")

Modules: :mod:`~kafkalog.spark.source` (the DataSource), :mod:`~kafkalog.spark.options`,
:mod:`~kafkalog.spark.offsets`, :mod:`~kafkalog.spark.planning` (pure, no Spark needed),
:mod:`~kafkalog.spark.schema`, :mod:`~kafkalog.spark.reader` (batch), :mod:`~kafkalog.spark.stream_reader`
(micro-batch), :mod:`~kafkalog.spark.writer` (sinks), :mod:`~kafkalog.spark.workers` (the workers'
interpreter), :mod:`~kafkalog.spark.remote` (object storage: storage options, what tasks carry). ``pyspark`` is imported only when the data source class is first used, so the pure modules
work without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalog.spark.remote import storage_options
from kafkalog.spark.workers import WorkerPythonError, check_workers, register, worker_python

if TYPE_CHECKING:
    from kafkalog.spark.source import KafkaLogDataSource

__all__ = [
    "KafkaLogDataSource",
    "WorkerPythonError",
    "check_workers",
    "register",
    "storage_options",
    "worker_python",
]


def __getattr__(name: str) -> Any:
    if name == "KafkaLogDataSource":
        try:
            from kafkalog.spark.source import KafkaLogDataSource
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in ("pyspark", "pyarrow"):
                raise
            raise ModuleNotFoundError(
                f"the kafkalog Spark data source needs pyspark and pyarrow: pip install 'kafkalog[spark]' ({exc})",
                name=exc.name,
            ) from exc
        return KafkaLogDataSource
    raise AttributeError(f"module 'kafkalog.spark' has no attribute {name!r}")
