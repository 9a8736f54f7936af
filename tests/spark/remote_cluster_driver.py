"""Run by ``tests/spark/test_remote_read.py``: a Spark driver on ``local-cluster[2,1,1024]`` (two executor JVMs
with their own Python workers) reading a URL of object storage; prints the rows as JSON lines on stdout.

Arguments: ``URL TOPIC``; the source options (the storage options among them) as JSON on stdin, so no
credential shows in the process list."""

from __future__ import annotations

import base64
import json
import os
import sys


def main() -> None:
    url, topic, options = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("kafkalog-remote-cluster")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .config("spark.executor.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from kafkalog.spark import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
    df = spark.read.format("kafkalog").options(**options).option("subscribe", topic).load(url)
    rows = df.collect()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    print(json.dumps({"executors": int(executors)}))
    for r in rows:
        print(
            json.dumps(
                [
                    r.partition,
                    r.offset,
                    None if r.key is None else base64.b64encode(bytes(r.key)).decode(),
                    None if r.value is None else base64.b64encode(bytes(r.value)).decode(),
                    r.timestamp.isoformat(),
                ]
            )
        )
    spark.stop()


if __name__ == "__main__":
    main()
