"""Auto-registration of the ``kafkalog`` PySpark data source.

PySpark imports every top-level module named ``pyspark_*`` at its first data-source lookup and registers
its ``DefaultSource`` (a ``DataSource`` subclass) under ``DefaultSource.name()``. Installing kafkalog with
this module makes ``spark.read.format("kafkalog")`` work without ``spark.dataSource.register(...)``.
Kept import-cheap: the data source module imports the log and Arrow layers only when a query is planned.
"""

from __future__ import annotations

from kafkalog.spark.source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
