"""Tiered storage (issue #25): kafkalog's own logs copied to and read back from a real S3 server (SeaweedFS on
loopback, started here by :mod:`bench.seaweed`), through the ``LogManager`` with
``remote.log.storage.system.enable=true``.

Rows (same-run ratios; rounds interleaved, the order reversed every other round, after one warm-up round):

* **copy throughput** — ``LogManager.copy_remote_segments()`` (Kafka's ``RLMCopyTask``: metadata record,
  ``.log``, ``.indexes``, manifest, metadata record per segment) of a topic's rolled segments (4 partitions of
  32 MiB segments, ~256 MiB; ``--quick``: 4 MiB segments, ~64 MiB), in bytes of ``.log`` per second, against
  obstore's own parallel ``put_async`` of the same ``.log`` bytes to the same server (one object per
  segment, all at once), configured as kafkalog configures its store. Target >= 0.8x.
* **appends with tiering on** — ``append_as_leader`` of 1,000-record batches (100-byte values), 64 MiB per run
  (``--quick``: 16 MiB), into a topic with ``remote.storage.enable=true`` while the manager's copy task runs
  every 100 ms (copying what rolls), against the same appends into a topic of a manager without tiering; 9
  interleaved rounds (short runs: the shared machine's swings average out). Target >= 0.97x (within 3%).
* **fall-through read** — ``Log.read`` of every batch of a 32 MiB (``--quick``: 4 MiB) segment that is only in
  the remote tier (local copy deleted by local retention), 1 MiB per read, as a consumer fetches, against
  the ranged-read ceiling: obstore's ``get_range_async`` of the same byte ranges of the same ``.log`` object,
  one after the other. Target >= 0.5x.

Run standalone: ``python bench/bench_tiering.py [--quick]``; the harness imports :func:`run`.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # standalone: make ``kafkalog`` (src layout) and the repo importable
    _ROOT = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

from bench.harness import Row, Stats, evaluate_target, log
from bench.seaweed import S3Server, running_server

__all__ = ["run"]

AREA = "tiering"
PARTITIONS = 4
FULL_SEGMENT_BYTES = 32 * 1024 * 1024
QUICK_SEGMENT_BYTES = 4 * 1024 * 1024
FULL_SEGMENTS_PER_PARTITION = 2
QUICK_SEGMENTS_PER_PARTITION = 4
BATCH_RECORDS = 1_000
VALUE_BYTES = 100
FETCH_BYTES = 1024 * 1024
ROUNDS = 3
FULL_APPEND_BYTES = 64 * 1024 * 1024
QUICK_APPEND_BYTES = 16 * 1024 * 1024
#: Rounds of the append comparison: short runs, many of them, so the shared machine's swings average out.
APPEND_ROUNDS = 9
TS_BASE_MS = 1_700_000_000_000


def _batch(first: int) -> Any:
    from kafkalog.records import MemoryRecords, SimpleRecord

    value = b"v" * VALUE_BYTES
    return MemoryRecords.build(
        [SimpleRecord(value, b"%016d" % (first + i), TS_BASE_MS + first + i) for i in range(BATCH_RECORDS)]
    )


def _props(server: S3Server, bucket: str, **extra: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": 3_600_000,
        "remote.log.metadata.topic.num.partitions": 1,
        "rsm.config.storage.url": f"s3://{bucket}",
    }
    for key, value in server.options().items():
        props[f"rsm.config.storage.{key}"] = value
    props.update(extra)
    return props


def _fill(log_: Any, nbytes: int) -> None:
    from kafkalog.records import MemoryRecords

    template = bytes(_batch(0).buffer)
    written = 0
    while written < nbytes:
        log_.append_as_leader(MemoryRecords(bytearray(template)), 0)  # the leader assigns offsets in place
        written += len(template)


def _raw_store(server: S3Server, bucket: str) -> Any:
    from obstore.store import from_url

    from kafkalog.objstore.options import resolve

    cfg = resolve(f"s3://{bucket}", server.options())
    return from_url(f"s3://{bucket}", config=dict(cfg.config), client_options=dict(cfg.client_options))


def _put_all(store: Any, prefix: str, blobs: list[bytes]) -> None:
    import obstore

    async def put() -> None:
        await asyncio.gather(*(obstore.put_async(store, f"{prefix}/{i}.log", b) for i, b in enumerate(blobs)))

    asyncio.run(put())


def _ratio_row(
    name: str, ours: list[float], theirs: list[float], unit: str, baseline: str, target: str, note: str
) -> Row:
    ratios = [m / t for m, t in zip(ours, theirs, strict=True)]
    o, b, q = Stats.of(ours), Stats.of(theirs), Stats.of(ratios)
    row = Row(
        area=AREA,
        name=name,
        value=o.median,
        unit=unit,
        baseline_name=baseline,
        baseline_value=b.median,
        ratio=q.median,
        target=target,
        spread=o.spread,
        baseline_spread=b.spread,
        ratio_spread=q.spread,
        runs=q.n,
        note=note,
    )
    row.passed = evaluate_target(target, value=row.value, unit=row.unit, ratio=row.ratio)
    return row


def _interleaved(sides: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Each side's figure per round: one unrecorded warm-up round, then ``rounds`` interleaved ones."""
    out: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(rounds + 1):
        for name in order if r % 2 else list(reversed(order)):
            value = sides[name]()
            if r:
                out[name].append(value)
        if r:
            log(f"{AREA}: round {r}: " + ", ".join(f"{k} {v[-1] / 2**20:.1f} MiB/s" for k, v in out.items()))
    return out


# ---------------------------------------------------------------------------------------------------- copy


def copy_rows(server: S3Server, tmp: Path, quick: bool) -> list[Row]:
    from kafkalog.manager import LogManager

    seg = QUICK_SEGMENT_BYTES if quick else FULL_SEGMENT_BYTES
    per = QUICK_SEGMENTS_PER_PARTITION if quick else FULL_SEGMENTS_PER_PARTITION
    bucket = server.make_bucket("tiercopy")
    raw = _raw_store(server, bucket)
    mgr = LogManager.open(tmp / "copy", config=_props(server, bucket), background=False)
    count = [0]
    total_bytes = [0]
    try:

        def ours() -> float:
            count[0] += 1
            topic = f"c{count[0]}"
            logs = mgr.create_topic(
                topic, PARTITIONS, {"remote.storage.enable": "true", "segment.bytes": seg}
            )
            for lg in logs:
                _fill(lg, seg * per)
                lg.roll()
            nbytes = sum(s.size for lg in logs for s in lg.segments[:-1])
            total_bytes[0] = nbytes
            started = time.perf_counter()
            copied = mgr.copy_remote_segments()
            seconds = time.perf_counter() - started
            assert copied == sum(len(lg.segments) - 1 for lg in logs), copied
            return nbytes / seconds

        def ceiling() -> float:
            topic = f"c{max(count[0], 1)}"
            blobs = (
                [
                    s.log.path.read_bytes()
                    for p in range(PARTITIONS)
                    for s in mgr.get_log(topic, p).segments[:-1]
                ]
                if count[0]
                else []
            )
            if not blobs:
                return 1.0
            nbytes = sum(len(b) for b in blobs)
            started = time.perf_counter()
            _put_all(raw, f"ceiling-{time.monotonic_ns()}", blobs)
            return nbytes / (time.perf_counter() - started)

        figures = _interleaved({"copy": ours, "put": ceiling})
    finally:
        mgr.close()
        shutil.rmtree(tmp / "copy", ignore_errors=True)
    label = f"{PARTITIONS} partitions x {per} segments of {seg // 2**20} MiB" + (" (quick)" if quick else "")
    return [
        _ratio_row(
            f"copy to the remote tier (RLMCopyTask pass), {label}",
            figures["copy"],
            figures["put"],
            "B/s",
            "obstore put_async of the same .log bytes to the same server, every segment at once",
            ">= 0.8x",
            f"{total_bytes[0] / 2**20:.0f} MiB of .log per pass; ours also writes .indexes, the manifest and "
            "two durable metadata records per segment",
        )
    ]


# ---------------------------------------------------------------------------------------------------- appends


def append_rows(server: S3Server, tmp: Path, quick: bool) -> list[Row]:
    from kafkalog.manager import LogManager

    nbytes = QUICK_APPEND_BYTES if quick else FULL_APPEND_BYTES
    seg = QUICK_SEGMENT_BYTES if quick else FULL_SEGMENT_BYTES
    bucket = server.make_bucket("tierappend")
    on = LogManager.open(
        tmp / "on", config=_props(server, bucket, **{"remote.log.manager.task.interval.ms": 100})
    )
    off = LogManager.open(tmp / "off")
    count = [0]
    try:

        def appends(mgr: Any, tiered: bool) -> Callable[[], float]:
            def run_() -> float:
                count[0] += 1
                config: dict[str, Any] = {"segment.bytes": seg, "retention.ms": -1}
                if tiered:
                    config["remote.storage.enable"] = "true"
                name = f"a{count[0]}"
                (lg,) = mgr.create_topic(name, 1, config)
                started = time.perf_counter()
                _fill(lg, nbytes)
                rate = nbytes / (time.perf_counter() - started)
                mgr.delete_topic(name)  # the disk holds one run at a time
                return rate

            return run_

        figures = _interleaved({"on": appends(on, True), "off": appends(off, False)}, APPEND_ROUNDS)
        copied = on.remote_log_metrics()["RemoteCopyBytesPerSec"]
    finally:
        on.close()
        off.close()
        shutil.rmtree(tmp / "on", ignore_errors=True)
        shutil.rmtree(tmp / "off", ignore_errors=True)
    return [
        _ratio_row(
            f"appends with tiering on (copy task every 100 ms), {nbytes // 2**20} MiB per run"
            + (" (quick)" if quick else ""),
            figures["on"],
            figures["off"],
            "B/s",
            "the same appends into a manager without tiering",
            ">= 0.97x",
            f"{copied / 2**20:.0f} MiB copied by the background task during the runs",
        )
    ]


# ---------------------------------------------------------------------------------------------------- read


def read_rows(server: S3Server, tmp: Path, quick: bool) -> list[Row]:
    from kafkalog.manager import LogManager

    seg = QUICK_SEGMENT_BYTES if quick else FULL_SEGMENT_BYTES
    bucket = server.make_bucket("tierread")
    raw = _raw_store(server, bucket)
    mgr = LogManager.open(tmp / "read", config=_props(server, bucket), background=False)
    try:
        (lg,) = mgr.create_topic(
            "r", 1, {"remote.storage.enable": "true", "segment.bytes": seg, "local.retention.bytes": 0}
        )
        _fill(lg, seg + seg // 2)
        lg.roll()
        mgr.copy_remote_segments()
        end = lg.segments[1].base_offset if len(lg.segments) > 1 else lg.log_end_offset
        mgr.delete_old_segments()
        assert lg.local_log_start_offset > 0, "the segment is still local"
        key = next(
            o.key
            for o in server.open(f"s3://{bucket}").list("", delimiter=False).objects
            if o.key.endswith(".log")
        )
        ranges: list[tuple[int, int]] = []
        nbytes = [0]

        def ours() -> float:
            import obstore  # noqa: F401  (the ceiling's client is loaded in both sides)

            offset, total = 0, 0
            spans: list[tuple[int, int]] = []
            position = 0
            started = time.perf_counter()
            while offset < end:
                info = lg.read(offset, FETCH_BYTES, min_one_message=True)
                mem = info.records if hasattr(info.records, "buffer") else info.records.to_memory_records()
                size = len(mem.buffer)
                batches = list(mem.batches())
                offset = batches[-1].last_offset + 1
                spans.append((position, position + size))
                position += size
                total += size
            seconds = time.perf_counter() - started
            ranges[:] = spans
            nbytes[0] = total
            return total / seconds

        def ceiling() -> float:
            import obstore

            spans = ranges or [(i, min(i + FETCH_BYTES, seg)) for i in range(0, seg, FETCH_BYTES)]

            async def read_all() -> int:
                got = 0
                for s, e in spans:
                    got += len(await obstore.get_range_async(raw, key, start=s, end=e))
                return got

            started = time.perf_counter()
            got = asyncio.run(read_all())
            return got / (time.perf_counter() - started)

        figures = _interleaved({"read": ours, "ranged": ceiling})
    finally:
        mgr.close()
        shutil.rmtree(tmp / "read", ignore_errors=True)
    return [
        _ratio_row(
            f"fall-through read of a remote segment ({seg // 2**20} MiB, 1 MiB reads)"
            + (" (quick)" if quick else ""),
            figures["read"],
            figures["ranged"],
            "B/s",
            "obstore get_range_async of the same byte ranges of the same .log object, one after the other",
            ">= 0.5x",
            f"{nbytes[0] / 2**20:.1f} MiB read through Log.read (remote offset index lookup, ranged GETs, "
            "whole batches)",
        )
    ]


def run(quick: bool) -> list[Row]:
    """Measure; rows for the report (every row, also where short of its target)."""
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-bench-tiering-"))
    out: list[Row] = []
    try:
        with running_server() as server:
            for name, fn in (("copy", copy_rows), ("appends", append_rows), ("read", read_rows)):
                log(f"{AREA}: {name}")
                out.extend(fn(server, tmp, quick))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Standalone run: print the rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    for row in run(args.quick):
        print(row.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
