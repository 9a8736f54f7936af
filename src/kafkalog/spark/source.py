"""``KafkaLogDataSource``: the PySpark data source named ``kafkalog`` (read, write, stream both ways).

Reads mirror Spark's built-in Kafka source over a directory of Kafka partition logs instead of brokers:
same schema (:mod:`kafkalog.spark.schema`), same options (:mod:`kafkalog.spark.options`), same offsets
JSON; writes are implemented in :mod:`kafkalog.spark.writer` (imported lazily, when a write is planned).

Where Spark runs each method (the instance is pickled between processes): ``schema()`` on the driver when
the DataFrame is defined; ``reader()``/``streamReader()`` on the driver when the query is planned (options
are checked there, so mistakes fail before any task runs); the readers' ``read()`` on executors.

The schema is fixed. A user schema is detected because Spark then skips :meth:`KafkaLogDataSource.schema`:
that call leaves a mark on the instance, which travels with it to ``reader()``; without the mark, any
schema other than Kafka's is rejected with the Kafka source's message.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource

from kafkalog.spark.options import parse_bool, parse_source_options

if TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )
    from pyspark.sql.types import StructType

__all__ = ["KafkaLogDataSource"]


def _writer_module() -> Any:
    """:mod:`kafkalog.spark.writer`, imported when a write is planned (it is its own engineer's module)."""
    return importlib.import_module("kafkalog.spark.writer")


class KafkaLogDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("kafkalog")`` over Kafka partition logs."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``kafkalog``."""
        return "kafkalog"

    def _include_headers(self) -> bool:
        return parse_bool("includeHeaders", str(self.options.get("includeheaders", "false")))

    def schema(self) -> StructType:
        """Spark's Kafka source schema (with ``headers`` when ``includeHeaders`` is true)."""
        from kafkalog.spark.schema import spark_schema

        self._kafkalog_schema = True
        return spark_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        from kafkalog.spark.schema import spark_schema

        if getattr(self, "_kafkalog_schema", False):
            return
        if schema != spark_schema(self._include_headers()):
            raise ValueError("Kafka source has a fixed schema and cannot be set with a custom one")

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader; raises ``ValueError`` for invalid options or a custom schema."""
        from kafkalog.spark.reader import batch_reader

        self._check_schema(schema)
        return batch_reader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch reader with admission control and ``Trigger.AvailableNow``.

        Invalid options (``endingOffsets`` in a streaming query, ...) fail the query with their own message
        on its first call: PySpark's stream runner calls ``stop()`` on a reader whose creation raised, and its
        ``UnboundLocalError`` would be appended to ours (Spark itself checks these options at ``load()``,
        which a Python data source cannot: ``schema()`` does not know whether the read is a stream).
        """
        from kafkalog.spark.stream_reader import KafkaLogStreamReader, RefusedStreamReader

        self._check_schema(schema)
        try:
            options = parse_source_options(self.options, streaming=True)
        except ValueError as exc:
            return RefusedStreamReader(exc)
        return KafkaLogStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer of :mod:`kafkalog.spark.writer`."""
        writer: Any = _writer_module().KafkaLogWriter(self.options, schema, overwrite)
        return writer  # type: ignore[no-any-return]

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming writer of :mod:`kafkalog.spark.writer`."""
        writer: Any = _writer_module().KafkaLogStreamWriter(self.options, schema, overwrite)
        return writer  # type: ignore[no-any-return]
