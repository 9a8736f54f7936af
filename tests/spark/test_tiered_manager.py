"""The archive a tiering LogManager writes (issue 25) is read like an archive a Kafka broker wrote: by the
object-storage reader (``ReadOnlyDataDir(s3://...)``, layout detected) and by the Spark source over the URL;
and the data dir plus its archive (which the data dir records) read as one history, by the Spark source
given the data dir and the storage options only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalog.readonly.log import ReadOnlyDataDir
from tiering.tier_helpers import TIERED_TOPIC, open_tiered, produce, tier_props

N = 400


@pytest.mark.spark
@pytest.mark.slow
def test_the_archive_of_a_tiering_manager_reads_like_a_brokers(
    spark: Any, s3_server: Any, tmp_path: Path
) -> None:
    bucket = s3_server.make_bucket("mgrarchive")
    data = tmp_path / "data"
    with open_tiered(data, tier_props(s3_server, bucket, prefix="tiered/")) as mgr:
        (log,) = mgr.create_topic("t", 2, {**TIERED_TOPIC, "local.retention.bytes": 1024})[:1]
        produce(log, N)
        mgr.copy_remote_segments()
        mgr.delete_old_segments()
        highest = log.highest_offset_in_remote_storage
        local_start = log.local_log_start_offset
        assert 0 < local_start <= highest + 1
    options = s3_server.options()
    url = f"s3://{bucket}/tiered"
    archive = ReadOnlyDataDir(url, options)
    assert archive.layout is not None and archive.layout.kind == "aiven"  # type: ignore[attr-defined]
    archived = archive.log("t", 0)
    assert (archived.log_start_offset, archived.log_end_offset) == (0, highest + 1)
    remote = spark.read.format("kafkalog").options(**options).option("subscribe", "t").load(url)
    got = sorted((r.offset, r.value) for r in remote.collect())
    assert got == [(i, b"v%d" % i) for i in range(highest + 1)]
    whole = spark.read.format("kafkalog").options(**options).option("subscribe", "t").load(str(data))
    rows = sorted((r.partition, r.offset, r.value) for r in whole.collect())
    assert rows == [(0, i, b"v%d" % i) for i in range(N)]
