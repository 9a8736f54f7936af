"""Tiered storage (issue #25): kafkalog's own logs copied to and read back from a real S3 server (SeaweedFS on
loopback, started here by :mod:`bench.seaweed`), through the ``LogManager`` with
``remote.log.storage.system.enable=true``.

Rows (same-run ratios; rounds interleaved, the order reversed every other round, after one warm-up round):

* **copy throughput** — ``LogManager.copy_remote_segments()`` (Kafka's ``RLMCopyTask``: metadata record,
  ``.log``, ``.indexes``, manifest, metadata record per segment) of a topic's rolled segments (4 partitions of
  32 MiB segments, ~256 MiB; ``--quick``: 4 MiB segments, ~64 MiB), in bytes of ``.log`` per second, against
  obstore's own parallel ``put_async`` of the same ``.log`` bytes to the same server (one object per
  segment, all at once), configured as kafkalog configures its store. Target >= 0.8x.
* **appends with tiering on** — ``append_as_leader`` of 1,000-record batches (100-byte values), 384 MiB per
  run into 16 MiB segments (``--quick``: 64 MiB into 4 MiB segments), 7 interleaved rounds of four sides. Every
  side first appends (untimed) and rolls a backlog of 6 segments, then times its appends:

  - *on*: a manager with tiering, copy task every 100 ms; the run starts once the task is uploading the
    backlog, and the backlog outlasts the run (checked: the note says in how many runs), so copying is in
    flight over the whole run;
  - *idle*: tiering on (``remote.storage.enable=true``, the remote reader attached), no copy pass runs;
  - *put*: no tiering, while obstore's own ``put`` uploads the backlog's ``.log`` files by path, one after
    another (read and sent by obstore's Rust runtime: no Python, no kafkalog code), to the same server: the
    physical floor of "an upload running on this machine";
  - *off*: a manager without tiering, nothing uploading.

  Rows: on / off (target >= 0.97x), idle / off (>= 0.97x), put / off (the floor, no target), on / put (what
  kafkalog's copy path adds beyond the upload, >= 0.97x), and on / off with the appending thread's run-queue
  wait (``/proc/thread-self/schedstat``) left out of both (>= 0.97x): what remains is the appender's own CPU
  and its sleeps (the GIL, the Log's lock, I/O), so that row shows kafkalog's share on a loaded machine; and
  the share of the on runs the appending thread slept (wall - on a CPU - waiting for one: the GIL, the Log's
  lock, I/O; <= 3 %), the figure a load swing does not move. The notes split each side's wall time into on a
  CPU / waiting for one / asleep and give the S3 server's CPU.
* **fall-through read** — ``Log.read`` of every batch of a 32 MiB (``--quick``: 4 MiB) segment that is only in
  the remote tier (local copy deleted by local retention), 1 MiB per read, as a consumer fetches, against
  the ranged-read ceiling: obstore's ``get_range_async`` of the same byte ranges of the same ``.log`` object,
  one after the other. Target >= 0.5x.

Run standalone: ``python bench/bench_tiering.py [--quick]``; the harness imports :func:`run`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # standalone: make ``kafkalog`` (src layout) and the repo importable
    _ROOT = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

from bench.harness import Row, Stats, evaluate_target, log, single_row
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
#: Bytes appended per measured run of the append rows (each ~0.3-1 s on the 2-core machine).
FULL_APPEND_BYTES = 384 * 1024 * 1024
QUICK_APPEND_BYTES = 64 * 1024 * 1024
#: segment.bytes of the append rows: many rolls per run, each a segment the copy task picks up.
FULL_APPEND_SEGMENT_BYTES = 16 * 1024 * 1024
QUICK_APPEND_SEGMENT_BYTES = 4 * 1024 * 1024
#: Rolled segments appended (untimed) before each run: what the copy task (or the floor's upload) is uploading
#: when the measured appends start, more than a run lasts, so the upload spans the whole run.
APPEND_BACKLOG_SEGMENTS = 6
#: Rounds of the append comparison (after the warm-up round; every side once per round, order reversed
#: every other round).
APPEND_ROUNDS = 7
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


def _server_cpu(server: S3Server) -> float:
    """CPU seconds (user + system, with reaped children) used so far by the S3 server's processes (those named
    ``weed`` whose command line names the server's private directory); NaN where ``/proc`` is not readable."""
    total = 0.0
    found = False
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if "(weed)" not in stat or server.data_dir not in Path(f"/proc/{pid}/cmdline").read_text(
                errors="replace"
            ):
                continue
            fields = stat.rsplit(")", 1)[1].split()
        except OSError:
            continue
        found = True
        total += sum(int(f) for f in fields[11:15]) / tick
    return total if found else math.nan


def _schedstat() -> tuple[float, float]:
    """The calling thread's ``(seconds on a CPU, seconds runnable but waiting for one)`` from
    ``/proc/thread-self/schedstat``; NaNs where it is not readable."""
    try:
        on_cpu, waiting, _ = Path("/proc/thread-self/schedstat").read_text().split()
    except (OSError, ValueError):
        return math.nan, math.nan
    return int(on_cpu) / 1e9, int(waiting) / 1e9


@dataclass(frozen=True)
class _AppendRun:
    """What one measured run saw: its wall time split into the appending thread's time on a CPU, runnable
    but waiting for a CPU (the machine's competition: other processes, the S3 server, obstore's threads),
    and the rest, asleep (waiting for the GIL, a lock or I/O); the S3 server's CPU; and whether an upload was
    in flight from before the first append to after the last."""

    wall: float
    on_cpu: float
    run_queue: float
    server_cpu: float
    overlapped: bool

    @property
    def asleep(self) -> float:
        return max(0.0, self.wall - self.on_cpu - self.run_queue)


def append_rows(server: S3Server, tmp: Path, quick: bool) -> list[Row]:
    from kafkalog.manager import LogManager

    nbytes = QUICK_APPEND_BYTES if quick else FULL_APPEND_BYTES
    seg = QUICK_APPEND_SEGMENT_BYTES if quick else FULL_APPEND_SEGMENT_BYTES
    backlog = APPEND_BACKLOG_SEGMENTS * seg
    bucket = server.make_bucket("tierappend")
    raw = _raw_store(server, bucket)
    copying = LogManager.open(
        tmp / "on", config=_props(server, bucket, **{"remote.log.manager.task.interval.ms": 100})
    )
    idle = LogManager.open(tmp / "idle", config=_props(server, bucket))  # tiering on, no copy pass runs
    off = LogManager.open(tmp / "off")
    count = [0]
    runs: dict[str, list[_AppendRun]] = {"on": [], "idle": [], "put": [], "off": []}
    try:

        def side(kind: str) -> Callable[[], float]:
            mgr = {"on": copying, "idle": idle, "put": off, "off": off}[kind]

            def run_() -> float:
                count[0] += 1
                name = f"a{count[0]}"
                config: dict[str, Any] = {"segment.bytes": seg, "retention.ms": -1}
                if kind in ("on", "idle"):
                    config["remote.storage.enable"] = "true"
                (lg,) = mgr.create_topic(name, 1, config)
                _fill(lg, backlog)  # the same rolled segments on every side: what is (or would be) copied
                lg.roll()
                backlog_end = lg.log_end_offset - 1
                stop = threading.Event()
                uploader: threading.Thread | None = None
                started = threading.Event()
                if kind == "on":  # wait for the copy task to start uploading the backlog
                    before = mgr.remote_log_metrics()["RemoteCopyRequestsPerSec"]
                    deadline = time.monotonic() + 60
                    while mgr.remote_log_metrics()["RemoteCopyRequestsPerSec"] == before:
                        if time.monotonic() > deadline:
                            raise RuntimeError("the copy task did not start copying within 60 s")
                        time.sleep(0.002)
                elif kind == "put":  # obstore's own upload of the same files, no kafkalog code in the loop
                    files = [s.log.path for s in lg.segments[:-1]]

                    def upload() -> None:
                        import obstore

                        from kafkalog.objstore.store import PUT_CONCURRENCY, PUT_PART_SIZE

                        i = 0
                        while not stop.is_set():
                            started.set()
                            obstore.put(
                                raw,
                                f"floor/{name}/{i}.log",
                                files[i % len(files)],
                                chunk_size=PUT_PART_SIZE,
                                max_concurrency=PUT_CONCURRENCY,
                            )
                            i += 1
                        started.set()

                    uploader = threading.Thread(target=upload, name="bench-floor-put", daemon=True)
                    uploader.start()
                    started.wait(60)
                server0 = _server_cpu(server)
                cpu0, queue0 = _schedstat()
                t0 = time.perf_counter()
                _fill(lg, nbytes)
                wall = time.perf_counter() - t0
                cpu1, queue1 = _schedstat()
                server_cpu = _server_cpu(server) - server0
                if kind == "on":  # still copying the backlog: the upload spanned the whole run
                    overlapped = lg.highest_offset_in_remote_storage < backlog_end
                elif kind == "put":
                    overlapped = uploader is not None and uploader.is_alive()
                else:
                    overlapped = False
                stop.set()
                if uploader is not None:
                    uploader.join()
                mgr.delete_topic(
                    name
                )  # the disk holds one run at a time; a copy under way ends with its segment
                if not mgr.remote_tier_idle(120):
                    raise RuntimeError("the remote tier did not finish deleting the run's segments in 120 s")
                runs[kind].append(_AppendRun(wall, cpu1 - cpu0, queue1 - queue0, server_cpu, overlapped))
                return nbytes / wall

            return run_

        figures = _interleaved({k: side(k) for k in ("on", "idle", "put", "off")}, APPEND_ROUNDS)
    finally:
        copying.close()
        idle.close()
        off.close()
        for d in ("on", "idle", "off"):
            shutil.rmtree(tmp / d, ignore_errors=True)
    measured = {k: v[1:] for k, v in runs.items()}  # the warm-up round is not recorded
    size = f"{nbytes // 2**20} MiB per run, {seg // 2**20} MiB segments" + (" (quick)" if quick else "")

    def cpu_note(kind: str) -> str:
        rs = measured[kind]
        share = {
            what: statistics.median(getattr(r, what) / r.wall for r in rs)
            for what in ("on_cpu", "run_queue", "asleep")
        }
        server_cores = statistics.median(r.server_cpu / r.wall for r in rs)
        ns = statistics.median(r.on_cpu for r in rs) * 1e9 / nbytes
        return (
            f"appending thread {share['on_cpu']:.0%} on a CPU ({ns:.2f} ns/B), {share['run_queue']:.0%} waiting "
            f"for one, {share['asleep']:.0%} asleep (GIL, locks, I/O); S3 server {server_cores:.2f} cores"
        )

    def not_queued(kind: str) -> list[float]:
        """Each run's rate counting only the time the appending thread was not waiting for a CPU."""
        return [nbytes / (r.wall - r.run_queue) for r in measured[kind]]

    overlap = sum(r.overlapped for r in measured["on"])
    put_overlap = sum(r.overlapped for r in measured["put"])
    return [
        _ratio_row(
            f"appends with tiering on, copying in flight over the whole run (copy task every 100 ms), {size}",
            figures["on"],
            figures["off"],
            "B/s",
            "the same appends into a manager without tiering (same backlog of rolled segments, nothing uploading)",
            ">= 0.97x",
            f"an upload of the {APPEND_BACKLOG_SEGMENTS}-segment backlog spanned the run in {overlap} of "
            f"{len(measured['on'])} runs; on: {cpu_note('on')}; off: {cpu_note('off')}",
        ),
        _ratio_row(
            f"appends with tiering on, no copy in flight, {size}",
            figures["idle"],
            figures["off"],
            "B/s",
            "the same appends into a manager without tiering",
            ">= 0.97x",
            f"remote.storage.enable=true, the remote reader attached, no copy pass runs; {cpu_note('idle')}",
        ),
        _ratio_row(
            f"appends while obstore uploads the same segment files (the floor: an upload on this machine), {size}",
            figures["put"],
            figures["off"],
            "B/s",
            "the same appends with nothing uploading",
            "",
            f"obstore.put of the backlog's .log files by path (read and sent by obstore's Rust runtime, no Python), "
            f"one after another, spanning the run in {put_overlap} of {len(measured['put'])} runs; {cpu_note('put')}",
        ),
        _ratio_row(
            f"appends with kafkalog's copy in flight vs with obstore's own upload in flight, {size}",
            figures["on"],
            figures["put"],
            "B/s",
            "the same appends while obstore uploads the same files (the floor row)",
            ">= 0.97x",
            "what kafkalog's copy path (RLMCopyTask, metadata records, .log/.indexes/manifest) costs appends "
            "beyond the upload itself",
        ),
        single_row(
            AREA,
            f"appending thread asleep (the GIL, the Log's lock, I/O) with copying in flight, % of the run, {size}",
            "%",
            Stats.of([100 * r.asleep / r.wall for r in measured["on"]]),
            target="<= 3 %",
            note=f"wall - on a CPU - waiting for one (/proc/thread-self/schedstat): what kafkalog's copy path could "
            f"make the appender wait for, whatever the load; without tiering "
            f"{statistics.median(100 * r.asleep / r.wall for r in measured['off']):.1f} %, with obstore's own upload "
            f"{statistics.median(100 * r.asleep / r.wall for r in measured['put']):.1f} %",
        ),
        _ratio_row(
            f"appends with tiering on, copying in flight, time waiting for a CPU left out, {size}",
            not_queued("on"),
            not_queued("off"),
            "B/s",
            "the same appends into a manager without tiering, the same way",
            ">= 0.97x",
            "bytes / (wall - the appending thread's run-queue wait, /proc/thread-self/schedstat): what is left "
            "is its own CPU plus its sleeps (the GIL, the Log's lock, I/O), the part kafkalog's copy path could "
            "add; the CPU the upload takes from a 2-core machine is the rest of the first row's gap",
        ),
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
