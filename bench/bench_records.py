"""Record-layer benchmarks (issue #2): batch validation, decoding to ``Record`` objects, encoding.

Targets quoted from the issue:

* batch validation (header parse + CRC) of 16 KiB uncompressed batches: **>= 2 GiB/s** (absolute; the
  ratio against a bare ``crc32c.crc32c`` over the same bytes in 16 KiB pieces is reported alongside);
* decoding records to ``Record`` objects: **>= 2x kafka-python's decoder** on the same bytes in the same
  run (uncompressed and zstd);
* encoding: **>= 2x kafka-python's builder** (batches of 500 records).

Data: 16-byte keys (``user-NNNNNNNNNNN``), 100-byte values (6 words from a 256-word vocabulary of 10-byte
words followed by 40 hex characters, so zstd compresses them about 2x, like typical JSON payloads) and
CreateTime timestamps 1 ms apart. Everything is generated from a fixed seed.

When Java, javac and Kafka's jars are available (see ``tests/interop/kafka_java.py``), the uncompressed
decode is also compared with Kafka's own ``FileRecords`` deep iteration, one pass per fresh JVM (JIT
warm-up included): informational, no target. Set ``KAFKALOG_BENCH_JAVA=0`` to skip it.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from typing import Any

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from bench.bench_baselines import KIB, MIB, bench_tmpdir
from bench.harness import Row, compare, comparison_row, load_kafka_java, log, rate, runs_for
from kafkalog.records import Compression, MemoryRecords, SimpleRecord

__all__ = [
    "decode_dataset",
    "decode_kafka_python",
    "decode_ours",
    "decode_rows",
    "encode_inputs",
    "encode_kafka_python",
    "encode_ours",
    "encode_row",
    "run",
    "validate_crc_pieces",
    "validate_ours",
    "validation_dataset",
    "validation_row",
]

AREA = "records"
SEED = 20240502
TS0 = 1_700_000_000_000
BATCH_TARGET = 16 * KIB
ENCODE_BATCH = 500
JAVA_ENV = "KAFKALOG_BENCH_JAVA"

KeyValueTs = tuple[bytes, bytes, int]


# ------------------------------------------------------------------------------------------------------ data


class RecordSource:
    """Deterministic 16-byte keys and 100-byte, about 2x compressible values."""

    def __init__(self, seed: int = SEED) -> None:
        self._rnd = random.Random(seed)
        self._words = [self._rnd.randbytes(5).hex().encode() for _ in range(256)]
        self._ts = TS0

    def next(self) -> KeyValueTs:
        """The next ``(key, value, timestamp)``."""
        rnd = self._rnd
        key = b"user-%011d" % rnd.randrange(10**11)
        value = b"".join(rnd.choices(self._words, k=6)) + rnd.randbytes(20).hex().encode()
        self._ts += 1
        return key, value, self._ts

    def take(self, n: int) -> list[KeyValueTs]:
        """``n`` records."""
        return [self.next() for _ in range(n)]


def _build(records: list[KeyValueTs], base_offset: int, codec: Compression = Compression.NONE) -> bytes:
    simple = [SimpleRecord(value, key, ts) for key, value, ts in records]
    return MemoryRecords.build(simple, base_offset=base_offset, compression=codec).to_bytes()


def _batch_of_about(source: RecordSource, size: int) -> bytes:
    """One uncompressed batch of as many records as fit in ``size`` bytes."""
    probe = source.take(100)
    per_record = (len(_build(probe, 0)) - 61) / len(probe)
    records = probe + source.take(max(0, int((size - 61) / per_record) - len(probe) + 2))
    while True:
        batch = _build(records, 0)
        if len(batch) <= size:
            return batch
        records.pop()


def validation_dataset(total: int, seed: int = SEED, templates: int = 32) -> tuple[bytes, int]:
    """About ``total`` bytes of uncompressed batches of at most 16 KiB (offsets continuous).

    ``templates`` distinct batches are built and tiled, rewriting each copy's base offset (outside the CRC).
    Returns ``(buffer, batch_count)``.
    """
    source = RecordSource(seed)
    tiles = [_batch_of_about(source, BATCH_TARGET) for _ in range(templates)]
    out = bytearray()
    offset = 0
    count = 0
    while len(out) < total:
        tile = tiles[count % len(tiles)]
        start = len(out)
        out += tile
        struct.pack_into(">q", out, start, offset)
        offset += struct.unpack_from(">i", tile, 57)[0]
        count += 1
    return bytes(out), count


def decode_dataset(records: int, codec: Compression, seed: int = SEED) -> tuple[bytes, int]:
    """Batches of 100-500 records (random sizes) until ``records`` records; returns ``(buffer, count)``."""
    source = RecordSource(seed)
    rnd = random.Random(seed + 1)
    parts = []
    offset = 0
    while offset < records:
        n = min(rnd.randint(100, 500), records - offset)
        parts.append(_build(source.take(n), offset, codec))
        offset += n
    return b"".join(parts), offset


def encode_inputs(batches: int, seed: int = SEED) -> list[list[KeyValueTs]]:
    """``batches`` lists of :data:`ENCODE_BATCH` ``(key, value, timestamp)`` tuples."""
    source = RecordSource(seed)
    return [source.take(ENCODE_BATCH) for _ in range(batches)]


# ------------------------------------------------------------------------------------------------- workloads


def validate_ours(buf: bytes) -> int:
    """Walk ``buf`` with ``MemoryRecords(buf).batches()`` and ``ensure_valid()`` each batch; returns the count."""
    n = 0
    for batch in MemoryRecords(buf).batches():
        batch.ensure_valid()
        n += 1
    return n


def validate_crc_pieces(buf: bytes, piece: int = BATCH_TARGET) -> int:
    """Baseline: ``crc32c.crc32c`` over ``buf`` in ``piece``-byte slices (no parsing at all)."""
    view = memoryview(buf)
    crc = crc32c.crc32c
    n = 0
    for pos in range(0, len(view), piece):
        crc(view[pos : pos + piece])
        n += 1
    return n


def decode_ours(buf: bytes) -> tuple[int, int]:
    """Every record of ``buf`` as a ``Record`` (key and value touched); returns ``(records, payload bytes)``."""
    n = 0
    payload = 0
    for record in MemoryRecords(buf).records():
        payload += len(record.key or b"") + len(record.value or b"")
        n += 1
    return n, payload


def decode_kafka_python(buf: bytes) -> tuple[int, int]:
    """The same with kafka-python: ``MemoryRecords(buf).next_batch()``, iterate, touch key and value."""
    n = 0
    payload = 0
    records = KpMemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        for record in batch:
            payload += len(record.key or b"") + len(record.value or b"")
            n += 1
    return n, payload


def encode_ours(inputs: list[list[KeyValueTs]]) -> int:
    """Build one batch per input list with ``MemoryRecords.build`` (making the ``SimpleRecord`` objects is
    timed too: a producer starts from keys and values); returns the total bytes."""
    total = 0
    for batch in inputs:
        records = [SimpleRecord(value, key, ts) for key, value, ts in batch]
        total += MemoryRecords.build(records).size_in_bytes
    return total


def encode_kafka_python(inputs: list[list[KeyValueTs]]) -> int:
    """The same with kafka-python's ``DefaultRecordBatchBuilder``; returns the total bytes."""
    total = 0
    for batch in inputs:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        for i, (key, value, ts) in enumerate(batch):
            builder.append(i, timestamp=ts, key=key, value=value, headers=[])
        total += len(builder.build())
    return total


# ------------------------------------------------------------------------------------------------------ Java


def _java_rows(buf: bytes, count: int, runs: int) -> list[Row]:
    """Ours vs Kafka's Java ``FileRecords`` deep iteration over the same file, if Java is available."""
    if os.environ.get(JAVA_ENV, "1").strip().lower() in ("0", "no", "false", "off"):
        log(f"{AREA}: Java comparison skipped ({JAVA_ENV}=0)")
        return []
    try:
        kafka_java = load_kafka_java()
        if kafka_java is None:
            log(f"{AREA}: Java comparison skipped (tests/interop/kafka_java.py not found)")
            return []
        harness: Any = kafka_java.KafkaJava.locate()
    except Exception as exc:  # Java missing, jars missing, compile error: the row is optional
        log(f"{AREA}: Java comparison skipped ({type(exc).__name__}: {exc})")
        return []
    with bench_tmpdir() as tmp:
        path = tmp / "00000000000000000000.log"
        path.write_bytes(buf)

        def java_rate() -> float:
            result = harness.bench_iterate(path)
            if int(result["records"]) != count:
                raise AssertionError(f"Java iterated {result['records']} records, expected {count}")
            return float(result["records"]) / float(result["seconds"])

        try:
            result = compare(rate(lambda: decode_ours(buf), count), java_rate, runs=runs, warmup=0)
        except Exception as exc:
            log(f"{AREA}: Java comparison failed ({type(exc).__name__}: {exc})")
            return []
        finally:
            harness.close()
    log(
        f"{AREA}: decode vs Kafka Java: {result.ours.median:.4g} vs {result.baseline.median:.4g} records/s "
        f"= {result.ratio.median:.2f}x"
    )
    return [
        comparison_row(
            AREA,
            "decode to Record objects, uncompressed (Kafka Java reference)",
            "records/s",
            result,
            f"Kafka {harness.kafka_clients_version} FileRecords deep iteration (Java)",
            note=f"Informational, no target; {runs} runs. Each Java run is one pass in a fresh JVM with "
            "default flags, timed inside Java (JIT warm-up included), reading the file through FileChannel "
            "from the page cache and copying each key and value to a byte[].",
        )
    ]


# ------------------------------------------------------------------------------------------------------- run


def _row(
    name: str,
    unit: str,
    ours: Callable[[], float],
    baseline: Callable[[], float],
    baseline_name: str,
    runs: int,
    target: str | None,
    note: str = "",
) -> Row:
    result = compare(ours, baseline, runs=runs, warmup=1)
    row = comparison_row(AREA, name, unit, result, baseline_name, target=target, note=note)
    log(
        f"{AREA}: {name}: {row.value:.4g} vs {row.baseline_value:.4g} {unit} = {row.ratio:.2f}x "
        f"(ratios {result.ratio.min:.2f}–{result.ratio.max:.2f}) target {target}: {row.passed}"
    )
    return row


def validation_row(total: int, runs: int) -> Row:
    """Batch validation (header parse + CRC) of ~16 KiB batches vs a bare CRC over the same bytes."""
    buf, batches = validation_dataset(total)
    if validate_ours(buf) != batches:
        raise AssertionError("validation walk did not see every batch")
    gib = len(buf) / (1 << 30)
    return _row(
        "batch validation, 16 KiB batches (header parse + CRC)",
        "GiB/s",
        rate(lambda: validate_ours(buf), gib),
        rate(lambda: validate_crc_pieces(buf), gib),
        "crc32c.crc32c over the same bytes in 16 KiB pieces",
        runs,
        ">= 2 GiB/s",
        note=f"{len(buf) / MIB:.0f} MiB buffer of {batches} uncompressed batches of "
        f"{len(buf) / batches / KIB:.1f} KiB on average, walked with "
        "MemoryRecords(buf).batches() + ensure_valid(); the ratio shows how close the walk comes to "
        "the bare CRC (it cannot exceed 1).",
    )


def decode_rows(n_records: int, codec: Compression, runs: int, java_runs: int) -> list[Row]:
    """Decoding to ``Record`` objects vs kafka-python (and, uncompressed, vs Kafka's Java code)."""
    buf, count = decode_dataset(n_records, codec)
    ours_check, theirs_check = decode_ours(buf), decode_kafka_python(buf)
    if ours_check != theirs_check or ours_check[0] != count:
        raise AssertionError(f"decoders disagree: ours {ours_check}, kafka-python {theirs_check}")
    label = "uncompressed" if codec is Compression.NONE else codec.kafka_name
    rows = [
        _row(
            f"decode to Record objects, {label}",
            "records/s",
            rate(lambda: decode_ours(buf), count),
            rate(lambda: decode_kafka_python(buf), count),
            "kafka-python MemoryRecords.next_batch() + iterate",
            runs,
            ">= 2x",
            note=f"{count} records in batches of 100-500 ({len(buf) / MIB:.1f} MiB); both sides iterate "
            "every record and read its key and value; neither checks CRCs.",
        )
    ]
    if codec is Compression.NONE and java_runs:
        rows.extend(_java_rows(buf, count, runs=java_runs))
    return rows


def encode_row(n_batches: int, runs: int) -> Row:
    """Encoding batches of :data:`ENCODE_BATCH` records vs kafka-python's builder (same bytes, checked)."""
    inputs = encode_inputs(n_batches)
    check = inputs[0]
    ours_bytes = MemoryRecords.build(
        [SimpleRecord(v, k, ts) for k, v, ts in check], partition_leader_epoch=0
    ).to_bytes()
    kp = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (k, v, ts) in enumerate(check):
        kp.append(i, timestamp=ts, key=k, value=v, headers=[])
    if ours_bytes != bytes(kp.build()):
        raise AssertionError("ours and kafka-python's builder do not produce the same bytes")
    n_records = n_batches * ENCODE_BATCH
    return _row(
        f"encode {ENCODE_BATCH}-record batches, uncompressed",
        "records/s",
        rate(lambda: encode_ours(inputs), n_records),
        rate(lambda: encode_kafka_python(inputs), n_records),
        "kafka-python DefaultRecordBatchBuilder",
        runs,
        ">= 2x",
        note=f"{n_batches} batches of {ENCODE_BATCH} records (16-byte key, 100-byte value, CreateTime); "
        "ours is timed from (key, value, ts) tuples including making the SimpleRecord objects; "
        "both produce the same bytes (checked).",
    )


def run(quick: bool) -> list[Row]:
    """The issue-#2 rows. ``quick``: 64 MiB validation buffer, 150k records to decode per codec, 100k to
    encode, 3 Java runs; full: 256 MiB, 500k, 300k, 5 Java runs."""
    runs = runs_for(quick)
    rows = [validation_row(64 * MIB if quick else 256 * MIB, runs)]
    for codec in (Compression.NONE, Compression.ZSTD):
        rows += decode_rows(150_000 if quick else 500_000, codec, runs, java_runs=3 if quick else 5)
    rows.append(encode_row(200 if quick else 600, runs))
    return rows
