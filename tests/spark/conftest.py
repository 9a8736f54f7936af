"""One SparkSession for the whole pytest run (local mode), shared by every Spark test.

Spark tests are marked ``spark`` and skip with a clear reason when pyspark or a JVM is missing; CI has both.
Starting a session costs ~8 s and the first Python data-source query another ~7 s, so never stop it per test.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

SRC_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))


def _skip_reason() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'kafkalog[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime on PATH (Spark needs Java 17 or 21)"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession with the ``kafkalog`` data source registered."""
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Workers import the data source classes by reference: make the source tree importable for them too.
    os.environ["PYTHONPATH"] = SRC_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName("kafkalog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        from kafkalog.spark import KafkaLogDataSource
    except ImportError:  # the data source is still being written
        pass
    else:
        session.dataSource.register(KafkaLogDataSource)
    yield session
    session.stop()
