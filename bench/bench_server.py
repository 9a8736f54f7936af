"""``kafkalog serve`` benchmarks (issue #12): Kafka clients through the wire protocol vs the log underneath.

Issue #12's target: *the protocol should cost at most half of the throughput*, i.e. produce and fetch
through an embedded :class:`~kafkalog.server.KafkaServer` on loopback at **>= 0.5x** of the same work done
directly on the :class:`~kafkalog.log.Log` in the same run.

Produce (100-byte random values, no keys, one partition, ``acks=1``, ``linger.ms=5``, ``batch.size`` 1 MiB,
no idempotence), each run into a new topic, timed from the first ``produce()`` to the end of ``flush()``:

* confluent-kafka ``Producer.produce()`` per record, no compression and lz4, vs ``Log.append_as_leader`` of
  *the same batches* (the ones that client run wrote, read back from the server's log, copied before the timed
  window) into a new log;
* the same client with ``produce_batch()`` (lists of 10,000 messages: the client's fastest Python path);
* what bounds the client figures, in the same rounds: the ``produce()`` loop alone (a producer whose
  bootstrap address has no listener: records are only queued), the same producer into a *black-hole* server
  (the real server with a Produce handler that answers success without appending: client + protocol, no
  storage), and raw pipelined Produce requests carrying the same batches (pre-encoded with kafka-python's
  message classes, no client library: the protocol's own cost next to ``append_as_leader``).

Fetch, over a partition the client produced (``N`` records):

* confluent-kafka ``Consumer`` with ``assign()`` from offset 0, ``consume(10000)`` until ``N`` records, vs a
  direct ``Log.read`` loop (1 MiB reads, next offset from the last complete batch) over the same log;
* the consumer's own ceiling: the ``consume()`` loop once librdkafka has prefetched the whole partition (the
  server's Fetch handler is wrapped to signal the fetch at the log end offset);
* raw Fetch requests (one 1 MiB partition fetch at a time, decoded with kafka-python's classes).

The raw Produce and Fetch requests are also sent to ``kafkalog serve`` started in a separate process (its own
GIL; the deployment shape).

The server is embedded (a thread of this process), as ``KafkaServer(data_dir, port=0)`` is used by
applications and tests: its Python shares the GIL with the client's ``produce()``/``consume()`` loops.
Everything is run in interleaved rounds (the order reversed every other round) so that drift on the shared
machine hits every figure alike; a row's ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import contextlib
import gc
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_baselines import MIB, bench_tmpdir
from bench.harness import Comparison, Row, Stats, comparison_row, log
from kafkalog.log import FetchIsolation, Log, LogConfig
from kafkalog.records import MemoryRecords
from kafkalog.records.kernels import (
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_POS,
    F_SIZE,
    as_uint8,
    scan_batches,
)

__all__ = ["interleave", "pair", "run"]

AREA = "server"
VALUE_SIZE = 100
TARGET = ">= 0.5x"
#: Records per run and recorded rounds (each after one warm-up round).
QUICK_RECORDS, FULL_RECORDS = 100_000, 300_000
QUICK_ROUNDS, FULL_ROUNDS = 5, 9
BATCH_BYTES = 1 << 20
CONSUME_CHUNK = 10_000
_MB = 1e6


# ------------------------------------------------------------------------------------------------ rounds


def interleave(runs: dict[str, Callable[[], float]], rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Call every run once per round, the order reversed every other round; ``warmup`` rounds unrecorded.

    Returns name -> the recorded figures, one per round (round ``i`` of every name ran back to back)."""
    names = list(runs)
    out: dict[str, list[float]] = {name: [] for name in names}
    for i in range(warmup + rounds):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            gc.collect()
            figure = runs[name]()
            if i >= warmup:
                out[name].append(figure)
        log(f"{AREA}: round {i + 1}/{warmup + rounds}: " + ", ".join(f"{n} {out[n][-1:]}" for n in names[:3]))
    return out


def pair(ours: Sequence[float], baseline: Sequence[float], scale: float = 1.0) -> Comparison:
    """A :class:`~bench.harness.Comparison` of two figures recorded in the same rounds (ratio per round);
    ``scale`` multiplies both sides (records/s -> MB/s)."""
    mine = [v * scale for v in ours]
    theirs = [v * scale for v in baseline]
    ratios = [m / t if t > 0 else float("inf") for m, t in zip(mine, theirs)]
    return Comparison(Stats.of(mine), Stats.of(theirs), Stats.of(ratios))


# -------------------------------------------------------------------------------------------------- batches


@contextlib.contextmanager
def _scratch(tmp: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="server-", dir=tmp))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def log_batches(target: Log) -> list[bytes]:
    """Every batch of ``target`` as bytes, as the client sent it (the base offset the log assigned reset
    to 0)."""
    out: list[bytes] = []
    offset = target.log_start_offset
    while offset < target.log_end_offset:
        info = target.read(offset, 8 * MIB)
        records = info.records
        mem = records if isinstance(records, MemoryRecords) else records.to_memory_records()
        data = bytes(mem.buffer)
        scan = scan_batches(as_uint8(data), max_batches=1 << 14)
        if scan.n == 0:
            raise AssertionError(f"no complete batch at offset {offset}")
        positions, sizes = scan.table[F_POS, : scan.n].tolist(), scan.table[F_SIZE, : scan.n].tolist()
        # as the client sent them: base offset 0 (outside the CRC), as Kafka's validator wants from a client
        out += [bytes(8) + data[pos + 8 : pos + size] for pos, size in zip(positions, sizes)]
        last = scan.n - 1
        offset = int(scan.table[F_BASE_OFFSET, last] + scan.table[F_LAST_OFFSET_DELTA, last]) + 1
    return out


def _records_in(batches: Sequence[bytes]) -> int:
    return sum(int.from_bytes(b[57:61], "big") for b in batches)


def append_same_batches(batches: Sequence[bytes], tmp: Path) -> float:
    """Records/s of ``Log.append_as_leader`` of copies of ``batches`` into a new log (copies made and the log
    opened before the timed window; nothing fsynced)."""
    copies = [MemoryRecords(bytearray(b)) for b in batches]
    records = _records_in(batches)
    with _scratch(tmp) as scratch:
        target = Log.open(scratch / "direct-0", LogConfig())
        append = target.append_as_leader
        gc.collect()
        start = time.perf_counter()
        for batch in copies:
            append(batch)
        elapsed = time.perf_counter() - start
        if target.log_end_offset != records:
            raise AssertionError(f"log end offset {target.log_end_offset}, expected {records}")
        target.close_handlers()
    return records / elapsed


def read_log_records(target: Log, end: int) -> int:
    """Read ``target`` from offset 0 to ``end`` through ``Log.read`` (1 MiB, high watermark); returns records."""
    offset = 0
    read = target.read
    isolation = FetchIsolation.HIGH_WATERMARK
    while offset < end:
        data = read(offset, MIB, isolation).records.buffer
        scan = scan_batches(as_uint8(data), max_batches=1 << 12)
        if scan.n == 0:
            raise AssertionError(f"Log.read returned no complete batch at offset {offset}")
        last = scan.n - 1
        offset = int(scan.table[F_BASE_OFFSET, last] + scan.table[F_LAST_OFFSET_DELTA, last]) + 1
    return offset


# ------------------------------------------------------------------------------------------------- clients


def _producer_config(bootstrap: str, codec: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "enable.idempotence": False,
        "linger.ms": 5,
        "batch.size": BATCH_BYTES,
        "message.max.bytes": BATCH_BYTES + 1024,
        "compression.type": codec,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_097_151,
        "log.connection.close": False,
    }


def _values(n: int) -> list[bytes]:
    rng = random.Random(12)
    pool = [rng.randbytes(VALUE_SIZE) for _ in range(1024)]
    return [pool[i % len(pool)] for i in range(n)]


def client_produce(
    server: Any,
    topic: str,
    values: Sequence[bytes],
    codec: str = "none",
    batched: bool = False,
    end_offset: Callable[[Any, str], int] | None = None,
) -> float:
    """Records/s of a confluent-kafka Producer writing ``values`` to partition 0 of a new ``topic``: from the
    first ``produce()`` to the end of ``flush()`` (every record acknowledged); connection and metadata are
    set up before. ``batched``: ``produce_batch()`` of 10,000-message lists instead of ``produce()``."""
    from confluent_kafka import Producer

    server.manager.create_topic(topic, 1)
    producer = Producer(_producer_config(server.bootstrap, codec))
    try:
        producer.list_topics(topic, timeout=10)  # metadata for the topic, connection to node 0
        producer.produce("warm", b"x", partition=0)
        if producer.flush(10) != 0:
            raise AssertionError("warm-up record not delivered")
        failures: list[object] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        messages = [{"value": v} for v in values] if batched else []
        produce = producer.produce
        gc.collect()
        start = time.perf_counter()
        if batched:
            for i in range(0, len(messages), CONSUME_CHUNK):
                producer.produce_batch(
                    topic, messages[i : i + CONSUME_CHUNK], partition=0, on_delivery=delivered
                )
        else:
            for value in values:
                produce(topic, value, partition=0, on_delivery=delivered)
                # delivery reports are served by flush(); the queue holds every record
        if producer.flush(120) != 0:
            raise AssertionError("records left undelivered")
        elapsed = time.perf_counter() - start
        if failures:
            raise AssertionError(f"{len(failures)} delivery failures, first: {failures[0]}")
    finally:
        producer.purge()
        producer.flush(5)
        with contextlib.suppress(Exception):
            producer.close()
    end = (end_offset or _log_end)(server, topic)
    if end != len(values):
        raise AssertionError(f"{topic}: log end offset {end}, expected {len(values)}")
    return len(values) / elapsed


def _log_end(server: Any, topic: str) -> int:
    return int(server.manager.get_log(topic, 0).log_end_offset)


def client_enqueue_only(values: Sequence[bytes]) -> float:
    """Records/s of the ``produce()`` loop alone: a producer whose bootstrap address has no listener, so
    records are only queued (then purged); the client's Python ceiling."""
    from confluent_kafka import Producer

    with socket.socket() as probe:  # a port nobody listens on: bind, learn it, close
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = _producer_config(f"127.0.0.1:{port}", "none")
    config["log_level"] = 0  # the refused connections are expected
    producer = Producer(config)
    try:
        produce = producer.produce
        gc.collect()
        start = time.perf_counter()
        for value in values:
            produce("nowhere", value, partition=0)
        elapsed = time.perf_counter() - start
    finally:
        producer.purge()
        producer.flush(5)
        with contextlib.suppress(Exception):
            producer.close()
    return len(values) / elapsed


def _consumer(bootstrap: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "log.connection.close": False,
            **extra,
        }
    )


def client_consume(server: Any, topic: str, n: int) -> float:
    """Records/s of a confluent-kafka Consumer reading ``n`` records of partition 0 from offset 0 with
    ``assign()`` and ``consume(10000)``; timed from the assign to the ``n``-th record."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(server.bootstrap)
    try:
        consumer.list_topics(topic, timeout=10)
        gc.collect()
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + 120
        consume = consumer.consume
        while got < n:
            messages = consume(min(CONSUME_CHUNK, n - got), 1.0)
            for message in messages:
                if message.error() is not None:
                    raise AssertionError(str(message.error()))
            got += len(messages)
            if time.monotonic() > deadline:
                raise AssertionError(f"read {got} of {n} records in 120 s")
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return n / elapsed


def client_consume_prefetched(server: Any, topic: str, n: int, fetched_to: FetchProbe) -> float:
    """Records/s of the ``consume(10000)`` loop alone: the whole partition is prefetched into librdkafka's
    queue first (the server sees a fetch at the log end offset), then only the Python loop is timed."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(
        server.bootstrap,
        **{"queued.min.messages": 10_000_000, "queued.max.messages.kbytes": 2_097_151},
    )
    try:
        consumer.list_topics(topic, timeout=10)
        fetched_to.arm(n)
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = consumer.consume(1, 10.0)
        if len(first) != 1 or not fetched_to.event.wait(60):
            raise AssertionError("the consumer did not prefetch the partition")
        time.sleep(0.05)  # let the broker thread hand the last response's records to the queue
        got = 1
        consume = consumer.consume
        gc.collect()
        start = time.perf_counter()
        while got < n:
            messages = consume(min(CONSUME_CHUNK, n - got), 1.0)
            got += len(messages)
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return (n - 1) / elapsed


# ---------------------------------------------------------------------------------------- raw protocol


class _Wire:
    """One blocking connection speaking kafka-python's message classes (requests pre-encoded by callers)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def encode(self, request: Any, version: int) -> bytes:
        self.correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation_id, client_id="bench")
        return bytes(request.encode(header=True, framed=True))

    def read_frame(self) -> bytearray:
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytearray:
        """``n`` bytes received straight into one buffer (``recv_into``: no chunk objects, no re-copies)."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("the server closed the connection")
            got += k
        return buf

    def close(self) -> None:
        self.sock.close()


def raw_produce(port: int, topic: str, batches: Sequence[bytes]) -> float:
    """Records/s of pipelined Produce v9 requests (``acks=1``) to partition 0 of ``topic`` (which must exist
    and be empty), one batch each, pre-encoded before the timed window: all are written while a reader thread
    collects the responses (every error code and base offset checked)."""
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    wire = _Wire(port)
    data = ProduceRequest.TopicProduceData
    frames = []
    for batch in batches:
        request = ProduceRequest[9](
            transactional_id=None,
            acks=1,
            timeout_ms=30_000,
            topic_data=[data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=batch)])],
        )
        frames.append(wire.encode(request, 9))
    answers: list[tuple[int, int]] = []

    def collect() -> None:
        for _ in frames:
            response = ProduceResponse.decode(wire.read_frame(), version=9, header=True)
            part = response.responses[0].partition_responses[0]
            answers.append((int(part.error_code), int(part.base_offset)))

    try:
        reader = threading.Thread(target=collect, name="bench-raw-produce")
        gc.collect()
        start = time.perf_counter()
        reader.start()
        for frame in frames:
            wire.sock.sendall(frame)
        reader.join()
        elapsed = time.perf_counter() - start
    finally:
        wire.close()
    firsts = [0]
    for batch in batches[:-1]:
        firsts.append(firsts[-1] + _records_in([batch]))
    if answers != [(0, first) for first in firsts]:
        raise AssertionError(f"raw produce answers {answers[:3]}..., expected base offsets {firsts[:3]}...")
    return _records_in(batches) / elapsed


@contextlib.contextmanager
def serve_process(data_dir: Path, topics: Sequence[str]) -> Iterator[int]:
    """``kafkalog serve data_dir`` in a separate process (its own GIL) with ``topics`` created first (one
    partition each); yields its port, stops it with SIGTERM."""
    from kafkalog.manager import LogManager

    manager = LogManager.open(data_dir)
    try:
        for topic in topics:
            manager.create_topic(topic, 1)
    finally:
        manager.close()
    command = [sys.executable, "-m", "kafkalog.cli", "serve", str(data_dir), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", proc.stdout.readline())
        if match is None:
            raise AssertionError("kafkalog serve did not report its port")
        yield int(match.group(1))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def raw_fetch(port: int, topic: str, end: int) -> float:
    """Records/s of Fetch v12 requests (one 1 MiB partition fetch at a time from the next offset, responses
    decoded with kafka-python's classes) reading partition 0 up to ``end``."""
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    wire = _Wire(port)
    fetch_topic = FetchRequest.FetchTopic
    try:
        gc.collect()
        start = time.perf_counter()
        offset = 0
        while offset < end:
            part = fetch_topic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=MIB)
            request = FetchRequest[12](
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=50 * MIB,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[fetch_topic(topic=topic, partitions=[part])],
                forgotten_topics_data=[],
                rack_id="",
            )
            wire.sock.sendall(wire.encode(request, 12))
            response = FetchResponse.decode(wire.read_frame(), version=12, header=True)
            partition = response.responses[0].partitions[0]
            if partition.error_code:
                raise AssertionError(f"fetch error {partition.error_code} at offset {offset}")
            scan = scan_batches(as_uint8(bytes(partition.records or b"")), max_batches=1 << 12)
            if scan.n == 0:
                raise AssertionError(f"no complete batch fetched at offset {offset}")
            last = scan.n - 1
            offset = int(scan.table[F_BASE_OFFSET, last] + scan.table[F_LAST_OFFSET_DELTA, last]) + 1
        elapsed = time.perf_counter() - start
    finally:
        wire.close()
    return end / elapsed


# ------------------------------------------------------------------------------------------------ servers


@dataclass
class FetchProbe:
    """Set :attr:`event` when a Fetch asks for an offset at or past :attr:`offset` (of any partition: one
    consumer fetches at a time; newer clients name topics by id, so the topic is not compared)."""

    offset: int = -1
    event: threading.Event = field(default_factory=threading.Event)

    def arm(self, offset: int) -> None:
        """Watch for a fetch at ``offset`` or beyond, with a new event."""
        self.event = threading.Event()
        self.offset = offset

    def saw(self, request: Any) -> None:
        """Called with every Fetch request before it is served."""
        if self.offset < 0 or self.event.is_set():
            return
        for fetch_topic in request.topics:
            if any(int(p.fetch_offset) >= self.offset for p in fetch_topic.partitions):
                self.event.set()


def _registry(*, black_hole: bool = False, probe: FetchProbe | None = None) -> Any:
    """The built-in registry, with Produce answered without appending (``black_hole``) and/or Fetch
    requests shown to ``probe`` before they are served."""
    from kafka.protocol.api_key import ApiKey

    from kafkalog.server.dispatch import Registry
    from kafkalog.server.server import default_registry

    registry = Registry()
    for spec in default_registry():
        handler = spec.handler
        if black_hole and spec.api_key == int(ApiKey.Produce):
            handler = _black_hole_produce
        elif probe is not None and spec.api_key == int(ApiKey.Fetch):
            handler = _probed(handler, probe)
        registry.register(spec.api_key, handler, min_version=spec.min_version, max_version=spec.max_version)
    return registry


def _probed(handler: Callable[..., Any], probe: FetchProbe) -> Callable[..., Any]:
    async def fetch(ctx: Any, request: Any) -> Any:
        probe.saw(request)
        return await handler(ctx, request)

    return fetch


#: The black-hole server's next offset per (topic, partition): what it has acknowledged.
_NEXT_OFFSET: dict[tuple[str, int], int] = {}


def _black_hole_end(_server: Any, topic: str) -> int:
    return _NEXT_OFFSET.get((topic, 0), 0)


async def _black_hole_produce(ctx: Any, request: Any) -> Any:
    """Produce that decodes the request (the connection layer did) and answers success, appending nothing."""
    from kafka.protocol.producer import ProduceResponse

    topic_response = ProduceResponse.TopicProduceResponse
    partition_response = topic_response.PartitionProduceResponse
    responses = []
    for topic_data in request.topic_data:
        partitions = []
        for part in topic_data.partition_data:
            key = (str(topic_data.name), int(part.index))
            base = _NEXT_OFFSET.get(key, 0)
            records = part.records or b""  # a view of the request frame: not copied
            _NEXT_OFFSET[key] = base + (int.from_bytes(records[57:61], "big") if len(records) >= 61 else 0)
            partitions.append(
                partition_response(
                    index=part.index,
                    error_code=0,
                    base_offset=base,
                    log_append_time_ms=-1,
                    log_start_offset=0,
                    record_errors=[],
                    error_message=None,
                )
            )
        responses.append(topic_response(name=topic_data.name, partition_responses=partitions))
    if int(request.acks) == 0:
        return None
    return ctx.response(responses=responses, throttle_time_ms=0)


# ------------------------------------------------------------------------------------------------------ run


def _mb(records: float) -> float:
    return records * VALUE_SIZE / _MB


def run(quick: bool) -> list[Row]:
    """The issue-#12 rows (see the module doc)."""
    from kafkalog.server import KafkaServer

    n = QUICK_RECORDS if quick else FULL_RECORDS
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    values = _values(n)
    probe = FetchProbe()
    process_topics = [f"raw-{i}" for i in range(rounds + 1)]
    with (
        bench_tmpdir("kafkalog-bench-server-") as tmp,
        KafkaServer(tmp / "data", port=0, registry=_registry(probe=probe)) as server,
        KafkaServer(tmp / "black-hole", port=0, registry=_registry(black_hole=True)) as black_hole,
        serve_process(tmp / "process", ["read", *process_topics]) as port,
    ):
        manager, hole_manager = server.manager, black_hole.manager
        assert manager is not None and hole_manager is not None
        for running in (manager, hole_manager):
            running.create_topic("warm", 1)
        counter = iter(range(1_000_000))

        def fresh(prefix: str) -> str:
            return f"{prefix}-{next(counter)}"

        # the batches each client run writes: taken from a first run (also the consumer's partition)
        log(f"{AREA}: {n:,} records of {VALUE_SIZE} B per run, {rounds} rounds after one warm-up")
        client_produce(server, "read", values)
        plain = log_batches(manager.get_log("read", 0))
        client_produce(server, "lz4-sample", values, "lz4")
        compressed = log_batches(manager.get_log("lz4-sample", 0))
        read_log = manager.get_log("read", 0)
        log(
            f"{AREA}: the client wrote {len(plain)} batches of ~{sum(map(len, plain)) / len(plain) / 1024:.0f} KiB "
            f"(none), {len(compressed)} of ~{sum(map(len, compressed)) / len(compressed) / 1024:.0f} KiB (lz4)"
        )
        if read_log_records(read_log, n) != n or raw_fetch(server.port, "read", n) <= 0:
            raise AssertionError("the read paths did not see every record")

        def produced(prefix: str, codec: str = "none", batched: bool = False) -> Callable[[], float]:
            def once() -> float:
                topic = fresh(prefix)
                try:
                    return client_produce(server, topic, values, codec, batched)
                finally:
                    manager.delete_topic(topic)

            return once

        def black_holed() -> float:
            topic = fresh("hole")
            try:
                return client_produce(black_hole, topic, values, end_offset=_black_hole_end)
            finally:
                hole_manager.delete_topic(topic)

        def raw() -> float:
            topic = fresh("raw")
            manager.create_topic(topic, 1)
            try:
                return raw_produce(server.port, topic, plain)
            finally:
                manager.delete_topic(topic)

        # the raw requests again against `kafkalog serve` in its own process: no GIL shared with this one
        if raw_produce(port, "read", plain) <= 0 or raw_fetch(port, "read", n) <= 0:
            raise AssertionError("the separate server did not take the batches")
        process_topic = iter(process_topics)

        figures = interleave(
            {
                "produce": produced("none"),
                "append": lambda: append_same_batches(plain, tmp),
                "produce lz4": produced("lz4", "lz4"),
                "append lz4": lambda: append_same_batches(compressed, tmp),
                "produce_batch": produced("batch", batched=True),
                "enqueue only": lambda: client_enqueue_only(values),
                "black hole": black_holed,
                "raw produce": raw,
                "consume": lambda: client_consume(server, "read", n),
                "Log.read": lambda: log_read_rate(read_log, n),
                "consume prefetched": lambda: client_consume_prefetched(server, "read", n, probe),
                "raw fetch": lambda: raw_fetch(server.port, "read", n),
                "raw produce, process": lambda: raw_produce(port, next(process_topic), plain),
                "raw fetch, process": lambda: raw_fetch(port, "read", n),
            },
            rounds,
        )
    return _rows(figures, n, plain, compressed)


def log_read_rate(target: Log, n: int) -> float:
    """Records/s of :func:`read_log_records` over the first ``n`` records of ``target``."""
    gc.collect()
    start = time.perf_counter()
    got = read_log_records(target, n)
    elapsed = time.perf_counter() - start
    if got < n:
        raise AssertionError(f"Log.read saw {got} of {n} records")
    return n / elapsed


def _rows(figures: dict[str, list[float]], n: int, plain: list[bytes], compressed: list[bytes]) -> list[Row]:
    plain_kib = sum(map(len, plain)) / len(plain) / 1024
    lz4_kib = sum(map(len, compressed)) / len(compressed) / 1024
    client = (
        f"confluent-kafka {_confluent_version()}; {n:,} records of {VALUE_SIZE} B random values per run, "
        "partition 0 of a new topic, acks=1, linger.ms=5, batch.size=1 MiB, no idempotence; timed from the "
        "first produce() to the end of flush(). The server is embedded (a thread of this process, sharing the "
        "GIL with the client's Python loop)."
    )
    fig = figures
    rows = [
        comparison_row(
            AREA,
            "confluent-kafka Producer -> KafkaServer, produce() per record, no compression",
            "records/s",
            pair(fig["produce"], fig["append"]),
            "Log.append_as_leader of the same batches, in process",
            target=TARGET,
            note=f"{client} The baseline appends copies of the {len(plain)} batches that client run wrote "
            f"(~{plain_kib:.0f} KiB each) into a new log. The client is the bottleneck: see the enqueue-only, "
            "black-hole and raw-request rows.",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Producer -> KafkaServer, produce() per record, no compression (MB/s of values)",
            "MB/s",
            pair(fig["produce"], fig["append"], _mb(1)),
            "Log.append_as_leader of the same batches, in process",
            target=TARGET,
            note="The same runs as the row above, in MB/s of record values (100 B per record).",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Producer -> KafkaServer, produce() per record, lz4",
            "records/s",
            pair(fig["produce lz4"], fig["append lz4"]),
            "Log.append_as_leader of the same lz4 batches, in process",
            target=TARGET,
            note=f"As the first row with compression.type=lz4 ({len(compressed)} batches of ~{lz4_kib:.0f} KiB; "
            "the random values do not compress). The log validates compressed batches by decompressing them "
            "(as Kafka's LogValidator does).",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Producer -> KafkaServer, produce_batch() of 10,000, no compression",
            "records/s",
            pair(fig["produce_batch"], fig["append"]),
            "Log.append_as_leader of the same batches, in process",
            target=TARGET,
            note="The client's fastest Python path (one call per 10,000 messages, built before the timed "
            "window); otherwise as the first row.",
        ),
        comparison_row(
            AREA,
            "client ceiling: confluent-kafka produce() loop, records only queued (no broker)",
            "records/s",
            pair(fig["enqueue only"], fig["append"]),
            "Log.append_as_leader of the same batches, in process",
            note="What bounds the Producer rows: the same produce() loop into a producer whose bootstrap address "
            "has no listener, so each record is only queued in librdkafka (then purged); no request is sent. "
            "Informational: no server can make the client faster than this.",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Producer -> KafkaServer, no compression, vs the client ceiling",
            "records/s",
            pair(fig["produce"], fig["enqueue only"]),
            "confluent-kafka produce() loop alone, records only queued (no broker)",
            target=TARGET,
            note="The first row's runs against the client's own ceiling in the same rounds: the share of the "
            "client's throughput that is left once the protocol and the log are behind it.",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Producer -> black-hole server (protocol, no append), no compression",
            "records/s",
            pair(fig["black hole"], fig["enqueue only"]),
            "confluent-kafka produce() loop alone, records only queued (no broker)",
            note="The real server (framing, decode, dispatch, response) with a Produce handler that answers "
            "success without appending: client + protocol without storage. Informational.",
        ),
        comparison_row(
            AREA,
            "raw pipelined Produce v9 requests of the same batches -> KafkaServer",
            "records/s",
            pair(fig["raw produce"], fig["append"]),
            "Log.append_as_leader of the same batches, in process",
            target=TARGET,
            note=f"The protocol's own cost: the {len(plain)} batches of the first row, one per Produce request "
            "(acks=1), pre-encoded with kafka-python's classes and written on one connection while a thread "
            "reads the responses; no client library in the timed path.",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Consumer (assign, consume(10000)) <- KafkaServer",
            "records/s",
            pair(fig["consume"], fig["Log.read"]),
            "Log.read loop over the same log (1 MiB reads), in process",
            target=TARGET,
            note=f"confluent-kafka {_confluent_version()}; {n:,} records ({len(plain)} batches of ~{plain_kib:.0f} KiB, "
            "written by the Producer) from offset 0; default fetch settings (fetch.min.bytes=1, 1 MiB per "
            "partition). Timed from assign() to the last record. The baseline returns the bytes (no per-record "
            "objects): the client's per-message Python objects bound this row, see the prefetched row.",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Consumer <- KafkaServer (MB/s of values)",
            "MB/s",
            pair(fig["consume"], fig["Log.read"], _mb(1)),
            "Log.read loop over the same log (1 MiB reads), in process",
            target=TARGET,
            note="The same runs as the row above, in MB/s of record values.",
        ),
        comparison_row(
            AREA,
            "client ceiling: confluent-kafka consume(10000) loop over prefetched records",
            "records/s",
            pair(fig["consume prefetched"], fig["Log.read"]),
            "Log.read loop over the same log (1 MiB reads), in process",
            note="The whole partition is first fetched into librdkafka's queue (the server signals the fetch at "
            "the log end offset), then only the consume() loop is timed: no server can make the client "
            "faster than this. Informational.",
        ),
        comparison_row(
            AREA,
            "confluent-kafka Consumer <- KafkaServer, vs the client ceiling",
            "records/s",
            pair(fig["consume"], fig["consume prefetched"]),
            "confluent-kafka consume(10000) loop over prefetched records",
            target=TARGET,
            note="The Consumer row's runs against the consumer's own ceiling in the same rounds.",
        ),
        comparison_row(
            AREA,
            "raw Fetch v12 requests (1 MiB each, one at a time) <- KafkaServer",
            "records/s",
            pair(fig["raw fetch"], fig["Log.read"]),
            "Log.read loop over the same log (1 MiB reads), in process",
            target=TARGET,
            note="The protocol's own cost for fetch: one request per 1 MiB partition fetch (no pipelining: each "
            "needs the previous one's next offset), the response decoded with kafka-python's classes, next "
            "offset from the last batch header.",
        ),
        comparison_row(
            AREA,
            "raw pipelined Produce v9 requests of the same batches -> kafkalog serve (own process)",
            "records/s",
            pair(fig["raw produce, process"], fig["append"]),
            "Log.append_as_leader of the same batches, in process",
            target=TARGET,
            note="As the raw Produce row, against `kafkalog serve` started in a separate process (the "
            "deployment shape): the server's Python does not share a GIL with the sending loop. On the 2-core "
            "machine the two processes still share the cores.",
        ),
        comparison_row(
            AREA,
            "raw Fetch v12 requests (1 MiB each, one at a time) <- kafkalog serve (own process)",
            "records/s",
            pair(fig["raw fetch, process"], fig["Log.read"]),
            "Log.read loop over the same log (1 MiB reads), in process",
            target=TARGET,
            note="As the raw Fetch row, against `kafkalog serve` in a separate process.",
        ),
    ]
    return rows


def _confluent_version() -> str:
    try:
        import confluent_kafka
    except ImportError:
        return "?"
    version = confluent_kafka.version()
    client = version if isinstance(version, str) else str(version[0])
    return f"{client} (librdkafka {confluent_kafka.libversion()[0]})"


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
