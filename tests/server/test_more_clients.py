"""More unmodified clients against the server: aiokafka (Python asyncio), kafkajs (Node.js) and kcat (the
librdkafka command line tool, as packaged by Debian).

Each test creates its topic (through the client's admin API where it has one), produces with compression,
keys and headers, and consumes everything back exactly (checked against what ``Log`` reads from the data
directory too). aiokafka and kafkajs also run a consumer group that commits and a second member that resumes
from the committed offsets, and a committed and an aborted transaction read back with ``read_committed``.

Skips, with the reason: aiokafka not installed (it is in the ``test`` extra); ``node`` missing or kafkajs 2 not
installed in ``<repo>/.interop-build/node/kafkajs-2/`` (``make test-deps`` installs it with npm); the ``kcat``
binary missing (``apt-get install kcat``). Under ``KAFKALOG_REQUIRE_ALL=1`` (``.ci/run``) each skip is a failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kafkalog.server import KafkaServer

from .helpers import log_records, producer_ids

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
JS_DIR = Path(__file__).resolve().parent / "js"
KAFKAJS_SPEC = "kafkajs@2"
NODE_CACHE = REPO_ROOT / ".interop-build" / "node" / KAFKAJS_SPEC.replace("@", "-")

#: Fast rebalances and few internal partitions (Kafka's defaults: a 3 s initial delay, 50 partitions).
FAST: dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 50,
    "offsets_topic_num_partitions": 3,
    "transaction_state_num_partitions": 3,
}

Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _on_disk(data_dir: Path, topic: str, partitions: int) -> list[Record]:
    """Every data record of the topic as ``Log`` reads it from the data directory (control batches skipped)."""
    out: list[Record] = []
    for p in range(partitions):
        out += [(p, o, k, v, h) for o, k, v, h in log_records(data_dir / f"{topic}-{p}")]
    return sorted(out, key=lambda r: (r[0], r[1]))


def _by_position(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r[0], r[1]))


# --------------------------------------------------------------------------------------------------- aiokafka

AIO_CODECS = ("gzip", "snappy", "lz4", "zstd", None)
AIO_PER_CODEC = 6


def _aio_expected() -> list[tuple[bytes | None, bytes, list[tuple[str, bytes | None]]]]:
    out = []
    for codec in AIO_CODECS:
        for i in range(AIO_PER_CODEC):
            key = None if i == 0 else f"{codec}-k{i}".encode()
            headers: list[tuple[str, bytes | None]] = [
                ("h", f"x{i}".encode()),
                ("codec", str(codec).encode()),
            ]
            out.append((key, f"{codec}-{i}".encode(), headers))
    return out


async def _aio_scenario(bootstrap: str, topic: str) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()

    expected = _aio_expected()
    for c, codec in enumerate(AIO_CODECS):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
        await producer.start()
        try:
            futures = []
            for i, (key, value, headers) in enumerate(expected[c * AIO_PER_CODEC : (c + 1) * AIO_PER_CODEC]):
                futures.append(await producer.send(topic, value, key=key, partition=i % 2, headers=headers))
            await producer.flush()
            for future in futures:
                await future
        finally:
            await producer.stop()

    tps = [TopicPartition(topic, p) for p in range(2)]

    async def read_all(isolation: str, count: int) -> list[Record]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            isolation_level=isolation,
            fetch_max_wait_ms=50,
        )
        await consumer.start()
        try:
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            return await _take(consumer, count)
        finally:
            await consumer.stop()

    plain = await read_all("read_uncommitted", len(expected))

    # group: the first member commits after each record it reads and stops at 17; the second resumes
    async def member(count: int) -> tuple[list[Record], dict[int, int]]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"{topic}-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )
        await consumer.start()
        try:
            seen: list[Record] = []
            deadline = time.monotonic() + 20
            while len(seen) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200, max_records=1)
                for tp, records in batches.items():
                    for r in records:
                        seen.append((tp.partition, r.offset, r.key, r.value, list(r.headers)))
                        await consumer.commit({tp: r.offset + 1})
            committed = {tp.partition: await consumer.committed(tp) for tp in tps}
            return seen, {p: -1 if o is None else o for p, o in committed.items()}
        finally:
            await consumer.stop()

    first, committed = await member(17)
    second, _ = await member(len(expected) - 17)

    # transactions: commit two records, abort two, commit one more
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"{topic}-tx", compression_type="lz4", linger_ms=5
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"committed-0", key=b"tk0", partition=0, headers=[("t", b"c")])
            await producer.send(topic, b"committed-1", key=b"tk1", partition=1)
        await producer.begin_transaction()
        await producer.send(topic, b"aborted-0", key=b"ak0", partition=0)
        await producer.send(topic, b"aborted-1", key=b"ak1", partition=1)
        await producer.flush()
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"committed-2", key=b"tk2", partition=0)
    finally:
        await producer.stop()
    read_committed = await read_all("read_committed", len(expected) + 3)
    read_uncommitted = await read_all("read_uncommitted", len(expected) + 5)
    return {
        "plain": plain,
        "first": first,
        "committed": committed,
        "second": second,
        "read_committed": read_committed,
        "read_uncommitted": read_uncommitted,
    }


async def _take(consumer: Any, count: int, seconds: float = 20.0) -> list[Record]:
    out: list[Record] = []
    deadline = time.monotonic() + seconds
    while len(out) < count and time.monotonic() < deadline:
        for tp, records in (await consumer.getmany(timeout_ms=200)).items():
            out += [(tp.partition, r.offset, r.key, r.value, list(r.headers)) for r in records]
    # a short extra poll: nothing beyond the expected records may come
    for tp, records in (await consumer.getmany(timeout_ms=300)).items():
        out += [(tp.partition, r.offset, r.key, r.value, list(r.headers)) for r in records]
    return out


def test_aiokafka_round_trip_group_and_transactions(data_dir: Path) -> None:
    pytest.importorskip("aiokafka", reason="aiokafka is in the test extra (pip install 'kafkalog[test]')")
    topic = "aio"
    expected = _aio_expected()
    with KafkaServer(data_dir, port=0, **FAST) as server:
        result = asyncio.run(asyncio.wait_for(_aio_scenario(server.bootstrap, topic), 60))

    plain: list[Record] = result["plain"]
    assert sorted(((k, v, h) for _, _, k, v, h in plain), key=repr) == sorted(expected, key=repr)
    # every record, as Log reads it back (offsets, keys, values, headers)
    on_disk = _on_disk(data_dir, topic, 2)
    assert _by_position(result["read_uncommitted"]) == on_disk
    assert _by_position(plain) == [
        r for r in on_disk if not (r[3] or b"").startswith((b"committed", b"aborted"))
    ]
    # the group: the second member resumed exactly where the first one's commits left off
    first, second = result["first"], result["second"]
    assert len(first) == 17 and len(second) == len(expected) - 17
    assert _by_position(first + second) == _by_position(plain)
    for p, offset in result["committed"].items():
        assert offset == max(r[1] for r in first if r[0] == p) + 1
        assert all(r[1] >= offset for r in second if r[0] == p)
    # transactions: read_committed sees the committed records and none of the aborted ones
    committed_values = sorted(
        v for _, _, _, v, _ in result["read_committed"] if v and v.startswith(b"commit")
    )
    assert committed_values == [b"committed-0", b"committed-1", b"committed-2"]
    assert not [r for r in result["read_committed"] if r[3] and r[3].startswith(b"aborted")]
    assert len(result["read_committed"]) == len(expected) + 3
    aborted = sorted(v for _, _, _, v, _ in result["read_uncommitted"] if v and v.startswith(b"aborted"))
    assert aborted == [b"aborted-0", b"aborted-1"]
    headers = {r[3]: r[4] for r in result["read_committed"]}
    assert headers[b"committed-0"] == [("t", b"c")]


# ---------------------------------------------------------------------------------------------------- kafkajs


def _kafkajs_dir() -> Path:
    """``node_modules`` with kafkajs 2 in :data:`NODE_CACHE` (``make test-deps`` installs it; the test installs
    nothing itself); skips with the reason when node or kafkajs is missing."""
    if shutil.which("node") is None:
        pytest.skip("node is needed for the kafkajs test (not on PATH)")
    modules = NODE_CACHE / "node_modules"
    if not (modules / "kafkajs" / "package.json").is_file():
        pytest.skip(f"{KAFKAJS_SPEC} is not installed in {NODE_CACHE}: run `make test-deps` (needs npm)")
    return modules


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _js_records(items: list[dict[str, Any]]) -> list[Record]:
    return [
        (
            int(r["partition"]),
            int(r["offset"]),
            _b64(r["key"]),
            _b64(r["value"]),
            [(str(k), _b64(v)) for k, v in r["headers"]],
        )
        for r in items
    ]


def test_kafkajs_round_trip_group_and_transactions(data_dir: Path) -> None:
    modules = _kafkajs_dir()
    topic, group = "js", "js-group"
    with KafkaServer(data_dir, port=0, **FAST) as server:
        env = {**os.environ, "NODE_PATH": str(modules)}
        done = subprocess.run(
            ["node", str(JS_DIR / "kafkajs_interop.js"), server.bootstrap, topic, group],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["created"] is True and result["partitions"] == 2

    first, second = _js_records(result["first"]), _js_records(result["second"])
    plain = first + second
    expected = []
    for i in range(20):
        headers = sorted([("h", f"x{i}".encode()), ("bin", bytes([0, 1, 2, i]))])
        expected.append((None if i == 0 else f"k{i}".encode(), f"v{i}".encode(), headers))
    assert sorted(((k, v, sorted(h)) for _, _, k, v, h in plain), key=repr) == sorted(expected, key=repr)
    on_disk = _on_disk(data_dir, topic, 2)
    # the group: 12 records committed one by one, the second member read exactly the other 8
    assert len(first) == 12 and len(second) == 8
    assert len({(p, o) for p, o, *_ in plain}) == 20
    committed = {int(c["partition"]): int(c["offset"]) for c in result["committed"]}
    for p in (0, 1):
        mine = [r[1] for r in first if r[0] == p]
        assert committed[p] == (max(mine) + 1 if mine else -1)
        assert all(r[1] >= max(committed[p], 0) for r in second if r[0] == p)
    # every record, as Log reads it back: the uncommitted view is the whole topic
    read_uncommitted = _by_position(_js_records(result["readUncommitted"]))
    assert [(p, o, k, v, sorted(h)) for p, o, k, v, h in read_uncommitted] == [
        (p, o, k, v, sorted(h)) for p, o, k, v, h in on_disk
    ]
    read_committed = _js_records(result["readCommitted"])
    values = sorted(v for _, _, _, v, _ in read_committed if v and not v.startswith(b"v"))
    assert values == [b"committed-0", b"committed-1", b"committed-2"]
    assert len(read_committed) == 23
    assert sorted(v for _, _, _, v, _ in read_uncommitted if v and v.startswith(b"aborted")) == [
        b"aborted-0",
        b"aborted-1",
    ]


# ------------------------------------------------------------------------------------------------------- kcat

KCAT_CODECS = ("gzip", "snappy", "lz4", "zstd", "none")


def test_kcat_produce_and_consume(data_dir: Path) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("the kcat binary is not on PATH (Debian/Ubuntu: apt-get install kcat)")
    topic = "kc"
    expected: list[tuple[int, bytes, bytes, list[tuple[str, bytes | None]]]] = []
    with KafkaServer(data_dir, port=0) as server:
        assert server.manager is not None
        server.manager.create_topic(topic, 2)  # kcat has no admin commands
        for c, codec in enumerate(KCAT_CODECS):
            partition = c % 2
            lines = [f"{codec}-k{i}\t{codec}-v{i}" for i in range(5)]
            sent_headers: list[tuple[str, bytes | None]] = [("codec", codec.encode()), ("n", str(c).encode())]
            produce = [kcat, "-P", "-b", server.bootstrap, "-t", topic, "-p", str(partition), "-z", codec]
            produce += ["-K", "\t", "-H", f"codec={codec}", "-H", f"n={c}"]
            produce += ["-X", "linger.ms=5", "-X", "enable.idempotence=true"]
            done = subprocess.run(
                produce,
                input="\n".join(lines) + "\n",
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            expected += [
                (partition, f"{codec}-k{i}".encode(), f"{codec}-v{i}".encode(), list(sent_headers))
                for i in range(5)
            ]
        consumed: list[Record] = []
        for partition in (0, 1):
            consume = [
                kcat,
                "-C",
                "-b",
                server.bootstrap,
                "-t",
                topic,
                "-p",
                str(partition),
                "-o",
                "beginning",
            ]
            consume += ["-e", "-J", "-X", "fetch.wait.max.ms=50"]
            done = subprocess.run(
                consume,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            for line in done.stdout.splitlines():
                if not line.strip():
                    continue
                item = json.loads(line)
                flat = item.get("headers") or []
                headers: list[tuple[str, bytes | None]] = [
                    (str(flat[i]), None if flat[i + 1] is None else str(flat[i + 1]).encode())
                    for i in range(0, len(flat), 2)
                ]
                consumed.append(
                    (
                        int(item["partition"]),
                        int(item["offset"]),
                        item["key"].encode(),
                        item["payload"].encode(),
                        headers,
                    )
                )
    assert sorted(((p, k, v, h) for p, _, k, v, h in consumed), key=repr) == sorted(expected, key=repr)
    on_disk = _on_disk(data_dir, topic, 2)
    assert _by_position(consumed) == on_disk
    assert len(on_disk) == len(KCAT_CODECS) * 5
    # enable.idempotence: every batch carries a producer id and sequence, one id per kcat run
    assert producer_ids(data_dir, topic, 2) == len(KCAT_CODECS)
