"""Columnar decode benchmark: Kafka RecordBatch v2 bytes -> Arrow, records/s on one core.

Target (issue text): **>= 25 million records/s on one core with CRC-32C checked** for 16-byte keys, 100-byte
values, uncompressed, batches of 100-500 records; reported also with 2 headers per record and with one
record per batch.

Shapes (all generated from a fixed seed with kafka-python's builder, then tiled with consecutive base offsets
to the dataset size, so the bytes are real Kafka batches):

* ``100-500/batch``: batch sizes drawn from 100..500 records;
* ``+2 headers``: the same plus two headers per record (``trace-id`` 16 bytes, ``type`` 4 bytes);
* ``1/batch``: one record per batch (61 bytes of batch header per record).

Each shape is decoded with ``iter_columnar`` over the whole buffer (RecordBatches of 65536 rows, dropped
as they come, as a Spark reader does), with and without CRC, and without the buffer pool (fresh output
memory every call). Baselines, measured interleaved with ours in the same run: a raw read of the same bytes
(copy into a buffer, as from the page cache) plus ``crc32c`` over them, expressed as records/s for the
records they hold; and kafka-python's decoder (``MemoryRecords``, CRC validated, every field touched) on a
slice of the same data. Figures are medians of wall-clock rates; the CPU-time (``thread_time``) median is in
the note because this 2-core VM is shared and wall time also counts time spent preempted.

Run standalone: ``python bench/bench_columnar.py [--quick]``; the harness imports :func:`run`.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # standalone: make ``kafkalog`` (src layout) and the repo importable
    _ROOT = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from kafkalog.records.columnar import BufferPool, iter_columnar

__all__ = ["SHAPES", "make_dataset", "run"]

AREA = "columnar"
SEED = 20261121
TS0 = 1_700_000_000_000
TARGET = ">= 25M records/s"
SHAPES: dict[str, dict[str, Any]] = {
    "100-500/batch": {"sizes": (100, 500), "headers": 0},
    "100-500/batch +2 headers": {"sizes": (100, 500), "headers": 2},
    "1/batch": {"sizes": (1, 1), "headers": 0},
}


def _template(rnd: random.Random, count: int, headers: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i in range(count):
        hdrs = [("trace-id", rnd.randbytes(16)), ("type", rnd.randbytes(4))][:headers]
        builder.append(i, timestamp=TS0 + i, key=rnd.randbytes(16), value=rnd.randbytes(100), headers=hdrs)
    return bytearray(builder.build())


def make_dataset(shape: str, target_bytes: int) -> tuple[bytes, int]:
    """Concatenated batches of ``shape`` (about ``target_bytes``) and their record count."""
    spec = SHAPES[shape]
    rnd = random.Random(SEED)
    lo, hi = spec["sizes"]
    templates = [_template(rnd, rnd.randint(lo, hi), spec["headers"]) for _ in range(16 if hi > 1 else 64)]
    counts = [struct.unpack_from(">i", t, 57)[0] for t in templates]
    out = bytearray()
    offset = 0
    i = 0
    while len(out) < target_bytes:
        batch = templates[i % len(templates)]
        struct.pack_into(">q", batch, 0, offset)  # baseOffset is outside the CRC
        out += batch
        offset += counts[i % len(templates)]
        i += 1
    return bytes(out), offset


def _decode(data: bytes, *, verify_crc: bool, pool: BufferPool | None) -> int:
    rows = 0
    for batch in iter_columnar(data, verify_crc=verify_crc, pool=pool):
        rows += batch.num_rows
    return rows


def _kafka_python(data: bytes) -> int:
    rows = 0
    mr = KpMemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        if not batch.validate_crc():
            raise AssertionError("kafka-python: CRC mismatch")
        for r in batch:
            _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
            rows += 1
    return rows


def _timed(work: Callable[[], object], amount: float) -> tuple[float, float]:
    """One run: (amount / wall seconds, amount / CPU seconds of this thread)."""
    gc.collect()
    w0, c0 = time.perf_counter(), time.thread_time()
    work()
    w1, c1 = time.perf_counter(), time.thread_time()
    return amount / max(w1 - w0, 1e-9), amount / max(c1 - c0, 1e-9)


def _interleaved(
    cases: dict[str, tuple[Callable[[], object], float]], runs: int
) -> dict[str, list[tuple[float, float]]]:
    """Run every case once per round (order rotating each round) after one warm-up round."""
    names = list(cases)
    for name in names:
        cases[name][0]()
    out: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for r in range(runs):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            work, amount = cases[name]
            out[name].append(_timed(work, amount))
    return out


def _median(samples: list[tuple[float, float]], which: int) -> float:
    return statistics.median(s[which] for s in samples)


def _row(
    name: str,
    samples: list[tuple[float, float]],
    baseline_name: str | None = None,
    baseline: list[tuple[float, float]] | None = None,
    target: str | None = None,
    note: str = "",
) -> dict[str, Any]:
    value = _median(samples, 0)
    row: dict[str, Any] = {
        "area": AREA,
        "name": name,
        "value": value,
        "unit": "records/s",
        "baseline_name": baseline_name,
        "baseline_value": None,
        "ratio": None,
        "target": target,
        "spread": [min(s[0] for s in samples), max(s[0] for s in samples)],
        "runs": len(samples),
        "note": f"cpu-time median {_median(samples, 1) / 1e6:.1f}M records/s" + (f"; {note}" if note else ""),
    }
    if baseline is not None:
        ratios = [a[0] / b[0] for a, b in zip(samples, baseline)]
        row["baseline_value"] = _median(baseline, 0)
        row["ratio"] = statistics.median(ratios)
    return row


def _shape_rows(shape: str, quick: bool, runs: int) -> list[dict[str, Any]]:
    data, n = make_dataset(shape, (32 if quick else 192) << 20)
    kp_data, kp_n = make_dataset(shape, (1 if quick else 4) << 20)
    pool = BufferPool()
    scratch = memoryview(bytearray(len(data)))

    def raw_read_crc() -> None:
        scratch[:] = data
        crc32c.crc32c(scratch)

    cases: dict[str, tuple[Callable[[], object], float]] = {
        "crc": (lambda: _decode(data, verify_crc=True, pool=pool), n),
        "nocrc": (lambda: _decode(data, verify_crc=False, pool=pool), n),
        "crc-nopool": (lambda: _decode(data, verify_crc=True, pool=None), n),
        "raw": (raw_read_crc, n),
        "kafka-python": (lambda: _kafka_python(kp_data), kp_n),
    }
    assert _decode(data, verify_crc=True, pool=pool) == n
    res = _interleaved(cases, runs)
    mb = len(data) / 2**20
    size = f"{n} records, {mb:.0f} MiB"
    main = shape == "100-500/batch"
    return [
        _row(
            f"{shape}: decode with CRC",
            res["crc"],
            "raw read + crc32c",
            res["raw"],
            TARGET if main else None,
            size,
        ),
        _row(
            f"{shape}: decode with CRC vs kafka-python",
            res["crc"],
            "kafka-python",
            res["kafka-python"],
            note=size,
        ),
        _row(f"{shape}: decode without CRC", res["nocrc"], "raw read + crc32c", res["raw"], note=size),
        _row(
            f"{shape}: decode with CRC, pool vs fresh memory",
            res["crc"],
            "no pool",
            res["crc-nopool"],
            note=size,
        ),
        _row(
            f"{shape}: raw read + crc32c",
            res["raw"],
            note=f"{len(data) / 2**30 * _median(res['raw'], 0) / n:.2f} GiB/s",
        ),
        _row(f"{shape}: kafka-python decode", res["kafka-python"], note=f"{kp_n} records"),
    ]


def _first_call_seconds(cold: bool) -> float:
    """Seconds for a fresh process to import kafkalog and run every kernel once (cold: empty numba cache)."""
    code = (
        "import time; t = time.perf_counter(); "
        "from kafkalog.records import kernels; kernels.warm_up(); print(time.perf_counter() - t)"
    )
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as cache:
        if cold:
            env["NUMBA_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
    return float(out.stdout.strip().splitlines()[-1])


def run(quick: bool) -> list[dict[str, Any]]:
    """All rows of this benchmark (``quick``: 32 MiB per shape and 5 runs; else 192 MiB and 9 runs)."""
    runs = 5 if quick else 9
    rows: list[dict[str, Any]] = []
    for shape in SHAPES:
        rows.extend(_shape_rows(shape, quick, runs))
    _first_call_seconds(cold=False)  # make sure the on-disk cache is filled
    cached = [_first_call_seconds(cold=False) for _ in range(3)]
    rows.append(
        {
            "area": AREA,
            "name": "first use in a fresh process, kernels cached on disk",
            "value": statistics.median(cached),
            "unit": "s",
            "baseline_name": None,
            "baseline_value": None,
            "ratio": None,
            "target": None,
            "note": "import kafkalog + numba, load every kernel, decode the golden batch",
        }
    )
    if not quick:
        rows.append(
            {
                "area": AREA,
                "name": "first use in a fresh process, cold compile",
                "value": _first_call_seconds(cold=True),
                "unit": "s",
                "baseline_name": None,
                "baseline_value": None,
                "ratio": None,
                "target": None,
                "note": "empty NUMBA_CACHE_DIR",
            }
        )
    return rows


def _print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'benchmark':62s} {'value':>14s} {'baseline':>26s} {'ratio':>7s}  target / note")
    for r in rows:
        if r["unit"] == "records/s":
            value = f"{r['value'] / 1e6:9.2f} Mrec/s"
        else:
            value = f"{r['value']:9.2f} {r['unit']:>5s}"
        base = ""
        if r.get("baseline_value"):
            base = f"{r['baseline_name'][:16]} {r['baseline_value'] / 1e6:.2f}M"
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") else ""
        verdict = ""
        if r.get("target"):
            verdict = f"{r['target']}: {'met' if r['value'] >= 25e6 else 'NOT met'}; "
        print(f"{r['name'][:62]:62s} {value:>14s} {base:>26s} {ratio:>7s}  {verdict}{r.get('note', '')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data and fewer runs")
    args = parser.parse_args()
    _print_table(run(args.quick))


if __name__ == "__main__":
    main()
