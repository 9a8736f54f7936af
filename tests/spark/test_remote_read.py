"""The ``kafkalog`` source over object storage (SeaweedFS, a real S3 server): a log-dir copy and a tiered-storage
archive in a bucket read as the same rows as the local directory, with every source option; ``tieredPath``
beside a local ``load(dir)``; the driver plans from listings and manifests only; no storage option's value in
a plan string or a partition's ``repr``; and a ``local-cluster`` run (separate executor JVMs and Python workers)
reading an archive that exists only in the bucket gets the rows ``local[2]`` gets from the local copy."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkalog.objstore import open_store
from kafkalog.objstore.open import forget_memory_store
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.reader import KafkaLogInputPartition, plan_batch
from kafkalog.spark.remote import RemoteSpec, open_spec, storage_options

from .conftest import SRC_DIR
from .test_read import TS, append_txn, end_txn, write_topic

TOPIC_ID = "MWJ6FHTfRYy67jzwZdeqSQ"


def copy_tree(root: Path, store: Any, prefix: str = "") -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            key = path.relative_to(root).as_posix()
            store.put(f"{prefix}/{key}" if prefix else key, path.read_bytes())


def archive_dir(data: Path, store: Any, topic: str, partitions: int, **options: Any) -> dict[int, int]:
    """Every rolled segment of ``topic`` in the Aiven layout; returns each partition's archive end."""
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    ends = {}
    for p in range(partitions):
        segments = segments_from_log_dir(data / f"{topic}-{p}")
        for i, seg in enumerate(segments):
            write_aiven_segment(
                store, seg, topic=topic, topic_id=TOPIC_ID, partition=p, event_timestamp_ms=i, **options
            )
        ends[p] = segments[-1].end_offset + 1
    return ends


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r.topic,
            r.partition,
            r.offset,
            r.key,
            r.value,
            r.timestamp,
            r.timestampType,
            tuple(map(tuple, r.headers)) if "headers" in r.__fields__ and r.headers else None,
        )
        for r in df.collect()
    )


def with_transactions(data: Path) -> None:
    from kafkalog.log import Log, LogConfig

    log = Log.open(data / "txn-0", LogConfig(segment_bytes=2048, index_interval_bytes=256))
    for i in range(12):
        append_txn(log, 100 + i % 3, [b"t%d-%d" % (i, j) for j in range(4)], seq=(i // 3) * 4)
        if i % 3 == 2:
            for pid in (100, 101, 102):
                end_txn(log, pid, "ABORT" if pid == 101 else "COMMIT")  # type: ignore[arg-type]
    log.close()


@pytest.fixture(scope="module")
def bucket_copy(s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    data = tmp_path_factory.mktemp("remote") / "data"
    write_topic(data, "events", 3, 40)
    with_transactions(data)
    bucket = s3_server.make_bucket("spark")
    copy_tree(data, s3_server.open(f"s3://{bucket}"), "copy")
    return data, f"s3://{bucket}/copy", s3_server.options()


@pytest.mark.spark
@pytest.mark.slow
def test_a_copy_in_a_bucket_reads_as_the_local_directory(spark: Any, bucket_copy: Any) -> None:
    data, url, options = bucket_copy
    cases: list[dict[str, str]] = [
        {"subscribe": "events"},
        {"subscribe": "events", "includeHeaders": "true", "minPartitions": "7"},
        {"subscribePattern": "ev.*|txn", "kafka.isolation.level": "read_committed"},
        {"subscribe": "txn"},
        {"assign": '{"events": [1, 2]}', "startingOffsets": '{"events": {"1": 17, "2": -2}}'},
        {"subscribe": "events", "startingTimestamp": str(TS + 50), "endingTimestamp": str(TS + 150)},
        {"subscribe": "events", "endingOffsets": '{"events": {"0": 33, "1": -1, "2": 5}}'},
    ]
    for case in cases:
        local = spark.read.format("kafkalog").options(**case).load(str(data))
        remote = spark.read.format("kafkalog").options(**options).options(**case).load(url)
        assert remote.schema == local.schema
        expected = rows(local)
        assert expected, case
        assert rows(remote) == expected, case
    missing = (
        spark.read.format("kafkalog").options(**options).option("subscribe", "events").load(url + "-typo")
    )
    with pytest.raises(Exception, match="nothing under this prefix"):
        missing.collect()


@pytest.mark.spark
def test_an_archive_and_tiered_path(spark: Any, s3_server: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_topic(data, "events", 2, 60, segment_bytes=2048)
    bucket = s3_server.make_bucket("archive")
    store = s3_server.open(f"s3://{bucket}/tiered")
    ends = archive_dir(data, store, "events", 2, compression=True, chunk_size=700)
    url = f"s3://{bucket}/tiered"
    options = s3_server.options()
    ending = json.dumps({"events": {str(p): e for p, e in ends.items()}})
    local = spark.read.format("kafkalog").option("subscribe", "events").option("endingOffsets", ending)
    remote = spark.read.format("kafkalog").options(**options).option("subscribe", "events").load(url)
    assert rows(remote) == rows(local.load(str(data)))
    full = rows(spark.read.format("kafkalog").option("subscribe", "events").load(str(data)))
    for p in range(2):  # local retention: the oldest segments are only in the archive now
        for log in sorted((data / f"events-{p}").glob("*.log"))[:3]:
            for f in log.parent.glob(log.stem + ".*"):
                f.unlink()
    history = spark.read.format("kafkalog").options(**options).option("tieredPath", url)
    assert rows(history.option("subscribe", "events").load(str(data))) == full


def test_the_driver_plans_from_listings_and_manifests_and_shows_no_secret(tmp_path: Path) -> None:
    """Planning (on the driver) an Aiven archive reads manifests and index blobs, never a ``.log``; the
    plan's tasks carry the storage options, but no ``repr`` shows a value."""
    data = tmp_path / "data"
    write_topic(data, "events", 2, 60, segment_bytes=2048)
    name = f"plan-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    archive_dir(data, store, "events", 2)
    reads: list[str] = []
    get, get_range, get_ranges = store.get, store.get_range, store.get_ranges
    store.get = lambda key: reads.append(key) or get(key)  # type: ignore[method-assign]
    store.get_range = lambda key, s, e: reads.append(key) or get_range(key, s, e)  # type: ignore[method-assign]
    store.get_ranges = lambda key, r: reads.append(key) or get_ranges(key, r)  # type: ignore[method-assign]
    try:
        secret = "s3cr3t-VALUE-never-shown"
        base = {
            "path": f"memory://{name}",
            "subscribe": "events",
            "kafka.isolation.level": "read_committed",
            "fs.s3a.secret.key": secret,
            "fs.s3a.access.key": "AKIA-visible-id",
        }
        opts = parse_source_options(base, streaming=False)
        tasks = plan_batch(opts)
        assert tasks and all(t.remote is not None for t in tasks)
        assert reads and not [k for k in reads if k.endswith(".log")], reads
        # A starting timestamp is resolved as Kafka does (the first record at or after it): from the time
        # indexes and manifests to one segment per partition, then one ranged read within it.
        reads.clear()
        plan_batch(parse_source_options({**base, "startingTimestamp": str(TS + 200)}, streaming=False))
        logs = [k for k in reads if k.endswith(".log")]
        assert len({k.split("/")[1] for k in logs}) == len(set(logs)) <= 2, logs
        shown = " ".join(
            repr(x) for x in (*tasks, *map(KafkaLogInputPartition, tasks), opts, tasks[0].remote)
        )
        assert secret not in shown and "AKIA-visible-id" not in shown
        assert "fs.s3a.secret.key" in repr(tasks[0].remote)
        spec = tasks[0].remote
        assert isinstance(spec, RemoteSpec) and spec.layout == "aiven"  # executors skip the detection
        assert dict(spec.options)["fs.s3a.secret.key"] == secret  # ... but get the credentials
    finally:
        forget_memory_store(name)


@pytest.mark.spark
def test_storage_options_copies_the_sessions_s3a_settings(spark: Any) -> None:
    spark.conf.set("spark.hadoop.fs.s3a.endpoint", "http://127.0.0.1:9")
    try:
        found = storage_options(spark)
        assert found["fs.s3a.endpoint"] == "http://127.0.0.1:9"
        assert all(k.startswith("fs.") for k in found)
    finally:
        spark.conf.unset("spark.hadoop.fs.s3a.endpoint")


@pytest.mark.spark
@pytest.mark.slow
def test_local_cluster_reads_an_archive_only_in_the_bucket(
    spark: Any, s3_server: Any, tmp_path: Path
) -> None:
    """Two executor JVMs with their own Python workers read an archive that exists only in the bucket, and get
    the rows ``local[2]`` gets from the local copy (nothing shared but the bucket)."""
    data = tmp_path / "data"
    write_topic(data, "events", 3, 50, segment_bytes=2048)
    bucket = s3_server.make_bucket("cluster")
    ends = archive_dir(data, s3_server.open(f"s3://{bucket}/kafka/"), "events", 3, compression=True)
    ending = json.dumps({"events": {str(p): e for p, e in ends.items()}})
    local = (
        spark.read.format("kafkalog")
        .option("subscribe", "events")
        .option("endingOffsets", ending)
        .load(str(data))
    )
    expected = sorted(
        [
            r.partition,
            r.offset,
            None if r.key is None else base64.b64encode(bytes(r.key)).decode(),
            None if r.value is None else base64.b64encode(bytes(r.value)).decode(),
            r.timestamp.isoformat(),
        ]
        for r in local.collect()
    )
    options = {**s3_server.options(), "minPartitions": "6"}
    env = {**os.environ, "PYTHONPATH": SRC_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("remote_cluster_driver.py")),
            f"s3://{bucket}/kafka",
            "events",
        ],
        input=json.dumps(options).encode(),
        capture_output=True,
        timeout=480,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith(("{", "["))]
    assert lines[0]["executors"] >= 3  # the driver and two executors
    assert len(expected) > 500  # every archived record (the active segments are not archived)
    assert sorted(lines[1:]) == expected
    assert s3_server.secret_key.encode() not in proc.stderr


def test_new_archived_segments_appear_to_a_stream(tmp_path: Path) -> None:
    """A stream over an archive: segments uploaded after the query started are planned at the next trigger
    (one LIST per partition tells), and an executor whose cached plan ends before its task re-plans."""
    from kafkalog.spark.planning import OffsetRange
    from kafkalog.spark.reader import LogDirs, make_tasks, read_task
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    data = tmp_path / "data"
    write_topic(data, "events", 1, 80, segment_bytes=2048)
    segments = segments_from_log_dir(data / "events-0")
    name = f"stream-{tmp_path.name}"
    store = open_store(f"memory://{name}")

    def upload(segs: list[Any]) -> None:
        for seg in segs:
            write_aiven_segment(store, seg, topic="events", topic_id=TOPIC_ID, partition=0)

    try:
        upload(segments[:2])
        opts = parse_source_options({"path": f"memory://{name}", "subscribe": "events"}, streaming=True)
        dirs = LogDirs(opts.paths, opts)
        tp = ("events", 0)
        assert dirs.select(opts.strategy) == [tp]
        first = dirs.bounds(tp, False).latest
        assert first == segments[1].end_offset + 1
        (early,) = make_tasks(dirs, [OffsetRange("events", 0, 0, first)], opts)
        assert early.remote is not None
        assert sum(b.num_rows for b in read_task(early, include_headers=False)) == first
        stale = open_spec(early.remote)  # a worker's cached view, planned before the next uploads
        dirs.refresh()
        dirs.log(tp, refresh=True)
        assert dirs.bounds(tp, False).latest == first  # nothing new: one LIST, no re-plan
        upload(segments[2:])
        dirs.refresh()
        dirs.log(tp, refresh=True)
        latest = dirs.bounds(tp, False).latest
        assert latest == segments[-1].end_offset + 1 > first
        (task,) = make_tasks(dirs, [OffsetRange("events", 0, first, latest)], opts)
        assert task.remote == early.remote and open_spec(task.remote) is stale
        rows_read = sum(b.num_rows for b in read_task(task, include_headers=False))
        assert rows_read == latest - first
    finally:
        forget_memory_store(name)


def test_a_segment_missing_from_an_archive_is_data_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Offsets in no archived segment are lost data (failOnDataLoss), never silently fewer rows."""
    from kafkalog.errors import OffsetOutOfRangeError
    from kafkalog.spark.reader import read_task
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    data = tmp_path / "data"
    write_topic(data, "events", 1, 80, segment_bytes=2048)
    segments = segments_from_log_dir(data / "events-0")
    name = f"gap-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    try:
        for i, seg in enumerate(segments):
            if i != 2:
                write_aiven_segment(store, seg, topic="events", topic_id=TOPIC_ID, partition=0)
        lost = segments[2].end_offset + 1 - segments[2].base_offset
        end = segments[-1].end_offset + 1
        for fail in ("true", "false"):
            opts = parse_source_options(
                {"path": f"memory://{name}", "subscribe": "events", "failOnDataLoss": fail}, streaming=False
            )
            (task,) = plan_batch(opts)
            assert (task.start, task.end) == (0, end)
            if fail == "true":
                with pytest.raises(
                    OffsetOutOfRangeError, match=f"Cannot fetch offsets \\[{segments[2].base_offset}"
                ):
                    list(read_task(task, include_headers=False))
            else:
                got = sum(b.num_rows for b in read_task(task, include_headers=False, fail_on_data_loss=False))
                assert got == end - lost
                assert f"[{segments[2].base_offset}, {segments[2].end_offset + 1})" in caplog.text
    finally:
        forget_memory_store(name)


@pytest.mark.parametrize("old_style", [False, True])
def test_an_archive_whose_logs_are_gone_while_manifests_remain_is_data_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, old_style: bool
) -> None:
    """Every ``.log`` object deleted while the manifests remain (a lifecycle rule, an interrupted delete): the
    manifests say the offsets were archived, so it is data loss, not an empty partition: ``failOnDataLoss=true``
    fails naming the objects gone, ``false`` warns with them and reads nothing. Gone before the first readable
    segment, it is a retention delete in progress: the archive starts after it, no data loss."""
    from kafkalog.errors import OffsetOutOfRangeError
    from kafkalog.spark.reader import read_task
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    data = tmp_path / "data"
    write_topic(data, "events", 1, 80, segment_bytes=2048)
    segments = segments_from_log_dir(data / "events-0")
    name = f"lost-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    try:
        stems = [
            write_aiven_segment(
                store, seg, topic="events", topic_id=TOPIC_ID, partition=0, old_style_manifest=old_style
            )
            for seg in segments
        ]
        store.delete(stems[0] + ".log")  # the oldest: a retention delete under way
        store.delete(stems[1] + ".indexes")
        (task,) = plan_batch(
            parse_source_options({"path": f"memory://{name}", "subscribe": "events"}, streaming=False)
        )
        assert (task.start, task.end) == (segments[2].base_offset, segments[-1].end_offset + 1)
        assert sum(b.num_rows for b in read_task(task, include_headers=False)) == task.end - task.start
        assert f"{stems[0]}.log gone, before the first readable segment" in caplog.text
        for stem in stems:
            store.delete(stem + ".log")
        caplog.clear()
        for fail in ("true", "false"):
            opts = parse_source_options(
                {"path": f"memory://{name}", "subscribe": "events", "failOnDataLoss": fail}, streaming=False
            )
            (task,) = plan_batch(opts)
            # an old-style manifest has no end offset: a lost last segment is known to hold its base offset
            end = segments[-1].base_offset + 1 if old_style else segments[-1].end_offset + 1
            assert (task.start, task.end) == (0, end)
            if fail == "true":
                with pytest.raises(
                    OffsetOutOfRangeError, match=r"Cannot fetch offsets \[0, .*objects are gone: .*\.log"
                ) as err:
                    list(read_task(task, include_headers=False))
                assert f"{stems[0]}.log" in str(err.value)
            else:
                assert (
                    sum(b.num_rows for b in read_task(task, include_headers=False, fail_on_data_loss=False))
                    == 0
                )
                assert f"{stems[-1]}.log" in caplog.text and "Cannot fetch offsets [0," in caplog.text
    finally:
        forget_memory_store(name)


def test_key_ring_errors_name_the_keyring_option_never_a_key(tmp_path: Path) -> None:
    """A wrong or unusable key in Spark's ``keyRing`` is an error naming that option and the key id (the
    reader's own ``key_ring`` name is not one a Spark user set), with no key material."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from kafkalog.errors import RemoteStorageError

    data = tmp_path / "data"
    write_topic(data, "events", 1, 40, segment_bytes=2048)
    name = f"ring-{tmp_path.name}"
    store = open_store(f"memory://{name}")

    def pem(key: rsa.RSAPrivateKey) -> str:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    try:
        archive_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        archive_dir(data, store, "events", 1, encryption=("kek-1", archive_key.public_key()))
        wrong = pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        for ring, expected in (
            ({"kek-1": wrong}, "does not decrypt with key 'kek-1' of the keyRing option"),
            ({"kek-9": wrong}, "which the keyRing option does not hold"),
            (
                {"kek-1": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"},
                "keyRing: key 'kek-1' is not",
            ),
        ):
            opts = parse_source_options(
                {"path": f"memory://{name}", "subscribe": "events", "keyRing": json.dumps(ring)},
                streaming=False,
            )
            with pytest.raises(RemoteStorageError) as info:
                plan_batch(opts)
            assert expected in str(info.value) and "PRIVATE KEY" not in str(info.value), str(info.value)
    finally:
        forget_memory_store(name)


@pytest.mark.parametrize("encrypted", [False, True])
def test_executors_read_an_archive_with_no_listing_or_manifest_request(
    tmp_path: Path, encrypted: bool
) -> None:
    """Planning an archive on the driver costs LISTs and one GET per manifest; its tasks pickle the planned
    segments (clipped to each task), so an executor makes no LIST and no manifest GET: ranged reads only."""
    import pickle

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from kafkalog.spark.reader import read_task

    data = tmp_path / "data"
    write_topic(data, "events", 2, 60, segment_bytes=2048)
    name = f"ship-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    options: dict[str, Any] = {"compression": True, "chunk_size": 700}
    ring: dict[str, str] = {}
    if encrypted:
        kek = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        options["encryption"] = ("kek-1", kek.public_key())
        ring["kek-1"] = kek.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
    ends = archive_dir(data, store, "events", 2, **options)
    manifests = sum(1 for k in store.list("", delimiter=False).objects if k.key.endswith(".rsm-manifest"))
    requests: list[str] = []
    get, get_range, get_ranges, listing = store.get, store.get_range, store.get_ranges, store.list
    store.get = lambda key: requests.append(key) or get(key)  # type: ignore[method-assign]
    store.get_range = lambda key, s, e: requests.append(key) or get_range(key, s, e)  # type: ignore[method-assign]
    store.get_ranges = lambda key, r: requests.append(key) or get_ranges(key, r)  # type: ignore[method-assign]
    store.list = lambda prefix="", **kw: requests.append(f"LIST {prefix}") or listing(prefix, **kw)  # type: ignore[method-assign]
    try:
        base = {"path": f"memory://{name}", "subscribe": "events", "minPartitions": "6"}
        if encrypted:
            base["keyRing"] = json.dumps(ring)
        opts = parse_source_options(base, streaming=False)
        tasks = plan_batch(opts)
        assert len(tasks) >= 6
        planning = list(requests)
        assert sum(k.endswith(".rsm-manifest") for k in planning) == manifests  # each manifest once
        assert any(k.startswith("LIST") for k in planning) and not [k for k in planning if k.endswith(".log")]
        shipped = pickle.dumps(tasks)
        assert ring.get("kek-1", "\0") not in repr(tasks)
        requests.clear()
        total = 0
        for task in pickle.loads(shipped):  # what each executor gets
            total += sum(b.num_rows for b in read_task(task, include_headers=False))
        assert total == sum(ends.values())
        assert not [k for k in requests if k.startswith("LIST") or k.endswith(".rsm-manifest")], requests
        assert {k.rsplit(".", 1)[1] for k in requests} <= {"log", "indexes"}
    finally:
        forget_memory_store(name)


@pytest.mark.spark
def test_no_secret_in_plans_logs_or_errors(
    spark: Any, s3_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    """Every secret a read can be given (the S3 secret key, a session token, an Azure account key, a SAS token,
    a key ring's PEM) is absent from ``explain()``, kafkalog's logs at DEBUG, the ``repr`` of tasks, and the
    error a failed task raises to the driver."""
    import logging
    import pickle

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from kafkalog.spark.reader import read_task

    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    data = tmp_path / "data"
    write_topic(data, "events", 1, 40, segment_bytes=2048)
    bucket = s3_server.make_bucket("secrets")
    url = f"s3://{bucket}/tiered"
    archive_dir(data, s3_server.open(url), "events", 1)
    token, account_key, sas = (
        "T0KEN-sentinel-9f3a",
        base64.b64encode(b"ACCOUNT-sentinel-77").decode(),
        "SAS-sentinel-1c",
    )
    options = {
        **s3_server.options(),
        f"fs.s3a.bucket.other-{bucket}.session.token": token,
        "fs.azure.account.key.acct.dfs.core.windows.net": account_key,
        "spark.hadoop.fs.azure.sas.fixed.token": sas,
        "keyRing": json.dumps({"kek-1": pem}),
    }
    sentinels = [options["fs.s3a.secret.key"], token, account_key, sas, pem.splitlines()[5]]

    def leaked(text: str) -> list[str]:
        return [s for s in sentinels if s in text]

    caplog.set_level(logging.DEBUG, logger="kafkalog")
    # in this process: planning, the tasks' reprs and pickles, reading them, and the logs of both
    opts = parse_source_options({"path": url, "subscribe": "events", **options}, streaming=False)
    tasks = plan_batch(opts)
    shipped = pickle.loads(pickle.dumps(tasks))
    assert sum(b.num_rows for t in shipped for b in read_task(t, include_headers=False)) > 0
    shown = " ".join(repr(x) for x in (*tasks, *map(KafkaLogInputPartition, tasks), opts, tasks[0].remote))
    # Spark: the plan as explain() prints it, and the query's rows
    df = spark.read.format("kafkalog").options(**options).option("subscribe", "events").load(url)
    df.explain(True)
    assert df.count() > 0
    # a task that fails on an executor (a segment's bytes damaged in the bucket): the error the driver gets
    store = s3_server.open(url)
    for meta in store.list("", delimiter=False).objects:
        if meta.key.endswith(".log"):
            damaged = bytearray(store.get(meta.key))
            damaged[100:140] = bytes(40)
            store.put(meta.key, bytes(damaged))
    with pytest.raises(Exception, match=r"CRC|[Cc]orrupt|damaged") as failed:
        df.collect()
    printed = capsys.readouterr()
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "kafkalog" in printed.out  # the plan was printed
    for where, text in [
        ("repr", shown),
        ("explain", printed.out),
        ("stderr", printed.err),
        ("logs", logs),
        ("task error", str(failed.value)),
    ]:
        assert not leaked(text), where


@pytest.mark.spark
@pytest.mark.slow
def test_a_stream_over_an_archive_sees_uploads_and_restarts_from_its_checkpoint(
    spark: Any, s3_server: Any, tmp_path: Path
) -> None:
    """``readStream`` of an archive in the bucket as a running Spark query with a checkpoint: segments uploaded
    between triggers are read, a restart resumes from the checkpoint, and every record lands exactly once."""
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    data = tmp_path / "data"
    write_topic(data, "events", 2, 60, segment_bytes=2048)
    segments = {p: segments_from_log_dir(data / f"events-{p}") for p in range(2)}
    assert all(len(s) >= 4 for s in segments.values())
    bucket = s3_server.make_bucket("stream")
    url = f"s3://{bucket}/tiered"
    store = s3_server.open(url)

    def upload(lo: int, hi: int | None) -> dict[int, int]:
        for p, segs in segments.items():
            for seg in segs[lo:hi]:
                write_aiven_segment(store, seg, topic="events", topic_id=TOPIC_ID, partition=p)
        return {p: segs[:hi][-1].end_offset + 1 for p, segs in segments.items()}

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start() -> Any:
        df = (
            spark.readStream.format("kafkalog")
            .options(**s3_server.options())
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .load(url)
        )
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    def sink() -> list[tuple[int, int]]:
        return sorted((r.partition, r.offset) for r in spark.read.parquet(str(out)).collect())

    def expected(ends: dict[int, int]) -> list[tuple[int, int]]:
        return sorted((p, o) for p, end in ends.items() for o in range(end))

    upload(0, 1)
    query = start()
    try:
        query.processAllAvailable()
        ends = upload(1, 2)  # uploaded while the query runs: the next trigger plans them
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    assert sink() == expected(ends)
    ends = upload(2, None)
    query = start()  # the restart resumes from the checkpoint's offsets
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    assert sink() == expected(ends)  # every record exactly once
    assert ends == {p: segs[-1].end_offset + 1 for p, segs in segments.items()}


def test_the_driver_plans_archived_partitions_concurrently(tmp_path: Path) -> None:
    """Each archived partition's planning (its LIST, then its manifests) runs beside the others' (old code:
    one partition after another, so each LIST and parse waited for the previous partition's GETs): the
    LISTs of both partitions must be in flight at once to pass the barrier."""
    import threading

    data = tmp_path / "data"
    write_topic(data, "events", 2, 40, segment_bytes=2048)
    name = f"concurrent-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    archive_dir(data, store, "events", 2)
    barrier = threading.Barrier(2, timeout=30)
    listed = store.list

    def list_(prefix: str = "", *, delimiter: bool = True) -> Any:
        if prefix.count("/") == 2:  # <topic>-<id>/<partition>/: a partition's planning LIST
            barrier.wait()
        return listed(prefix, delimiter=delimiter)

    store.list = list_  # type: ignore[method-assign]
    try:
        opts = {"path": f"memory://{name}", "subscribe": "events"}
        tasks = plan_batch(parse_source_options(opts, streaming=False))
        assert sorted(t.partition for t in tasks) == [0, 1] and all(t.end > t.start == 0 for t in tasks)
    finally:
        forget_memory_store(name)
