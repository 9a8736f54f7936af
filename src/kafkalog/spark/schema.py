"""The fixed schema of the ``kafkalog`` source: Spark's Kafka source schema, as Spark and as Arrow types.

========================  ===================================  ========================================
column                    Spark type                           Arrow type (what ``read()`` yields)
========================  ===================================  ========================================
key                       binary                               binary
value                     binary                               binary
topic                     string                               string
partition                 int                                  int32
offset                    bigint                               int64
timestamp                 timestamp                            timestamp[us, tz=UTC] (Kafka ms x 1000)
timestampType             int                                  int32 (0 CreateTime, 1 LogAppendTime)
headers (includeHeaders)  array<struct<key:string,             list<struct<key: string, value: binary>>
                          value:binary>>                       (null when a record has no header)
========================  ===================================  ========================================

Every field is nullable, nested ones too: PySpark compares the first Arrow batch of a read with this
schema exactly (names, types, timestamp unit and zone, nullability). The schema is fixed: a user-given
schema other than this one is rejected, as Spark's Kafka source rejects any.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["ARROW_TIMESTAMP", "FIELD_NAMES", "HEADERS_TYPE", "arrow_schema", "spark_schema"]

ARROW_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
#: Equal to :data:`kafkalog.records.columnar.HEADERS_TYPE` (not imported: that loads the numba kernels).
HEADERS_TYPE: Final = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
FIELD_NAMES: Final = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")

_ARROW_WITHOUT_HEADERS: Final = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", ARROW_TIMESTAMP),
        pa.field("timestampType", pa.int32()),
    ]
)
_ARROW_WITH_HEADERS: Final = _ARROW_WITHOUT_HEADERS.append(pa.field("headers", HEADERS_TYPE))


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the batches the reader yields."""
    return _ARROW_WITH_HEADERS if include_headers else _ARROW_WITHOUT_HEADERS


def spark_schema(include_headers: bool) -> StructType:
    """The Spark schema (``KafkaRecordToRowConverter.kafkaSchema``)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)
