"""Memory (issue #10): peak RSS of appending and scanning a large log, each run in a fresh subprocess.

Every measurement is one ``python -m bench.bench_memory WORKER ...`` subprocess. It imports kafkalog (the
log, the read-only view, the columnar decoder) and loads the numba kernels (``kafkalog.warm_up()``), reads
its ``VmRSS`` from ``/proc/self/status`` ("interpreter + imports"), does one workload and prints its peak
RSS (``VmHWM``) as JSON. Ours and its baseline run the very same script, so they differ only in the
workload:

* **append**: ``Log.append_as_leader`` of ~16 KiB uncompressed v2 batches (100-byte values, no keys; a pool of
  256 pre-built copies, base offset reset to 0 before each reuse) into a new log, then ``Log.close``, vs raw
  ``os.write`` of the same copies into one new file (no fsync);
* **Log.read scan**: ``Log.open`` (clean) and the whole log through ``Log.read`` (1 MiB ``max_length``,
  high-watermark isolation; each result dropped before the next read), vs a raw sequential read of the same
  ``.log`` files (1 MiB ``readinto``);
* **ReadOnlyLog scan**: ``ReadOnlyLog.read`` (1 MiB) over the whole log, vs the same raw read;
* **columnar decode**: ``ReadOnlyLog.iter_batch_chunks`` (16 MiB chunks) decoded by ``iter_columnar`` to
  Arrow (CRC checked, headers included; each RecordBatch dropped), the Spark-free read path, vs the same raw
  read.

Sizes: 1 GiB and 10 GiB (``--quick``: 102 MiB and 1 GiB), i.e. 1x and 10x. Subprocesses per side: 3 appends
and 3 rounds of scans at 1x; at 10x 2 appends and 3 rounds (``--quick``) or 1 append and 2 rounds (full:
appending 10 GiB takes minutes; peak RSS varies by well under 1 MiB between runs). Rows per workload and size: our
peak RSS (MiB) vs the baseline's, with the import-only RSS and both deltas over it in the note. Target
(issue #10), one row per workload: **peak RSS at 10x the data within +64 MiB of peak RSS at 1x**
(``<= 64 MiB``). The chart plots peak RSS vs data size (ours solid, baseline dashed).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.bench_baselines import GIB, KIB, MIB, bench_tmpdir
from bench.charts import format_x
from bench.harness import Row, Stats, evaluate_target, log

__all__ = [
    "WORKERS",
    "Peak",
    "build_rows",
    "measure",
    "read_status_kib",
    "run",
    "run_workload",
    "worker_main",
]

AREA = "memory"
SIZES = (GIB, 10 * GIB)
QUICK_SIZES = (GIB // 10, GIB)
FLAT = "<= 64 MiB"
POOL_COPIES = 256
_REPO = Path(__file__).resolve().parent.parent

#: workload -> (our worker, the baseline worker, the baseline's description)
WORKLOADS: dict[str, tuple[str, str, str]] = {
    "append": ("append", "raw-append", "raw os.write of the same batch copies (same subprocess setup)"),
    "Log.read scan": ("scan", "raw-scan", "raw sequential read of the .log files (same subprocess setup)"),
    "ReadOnlyLog scan": (
        "readonly-scan",
        "raw-scan",
        "raw sequential read of the .log files (same subprocess setup)",
    ),
    "columnar decode": (
        "columnar",
        "raw-scan",
        "raw sequential read of the .log files (same subprocess setup)",
    ),
}
WORKERS = ("append", "raw-append", "scan", "raw-scan", "readonly-scan", "columnar")


# ----------------------------------------------------------------------------------------- the subprocess


def read_status_kib(field: str, path: str = "/proc/self/status") -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM`` ...) in KiB."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _next_offset(data: object) -> tuple[int, int]:
    """``(bytes of complete batches, offset after the last complete batch)`` of a read's buffer."""
    from kafkalog.records.kernels import F_BASE_OFFSET, F_LAST_OFFSET_DELTA, as_uint8, scan_batches

    scan = scan_batches(as_uint8(data), max_batches=1 << 12)
    if scan.n == 0:
        return 0, -1
    last = scan.n - 1
    return int(scan.next_pos), int(
        scan.table[F_BASE_OFFSET, last] + scan.table[F_LAST_OFFSET_DELTA, last]
    ) + 1


def run_workload(kind: str, directory: Path, batches: int, template: bytes) -> int:
    """Run one workload; returns the bytes it appended, read or decoded (a check against the caller's)."""
    from kafkalog.log import FetchIsolation, Log, LogConfig
    from kafkalog.readonly.log import ReadOnlyLog
    from kafkalog.records import MemoryRecords
    from kafkalog.records.columnar import iter_columnar

    part = directory / "memory-0"
    if kind in ("append", "raw-append"):
        copies = [bytearray(template) for _ in range(POOL_COPIES)]
        if kind == "append":
            target = Log.open(part, LogConfig())
            append = target.append_as_leader
            zero = bytes(8)
            for i in range(batches):
                buf = copies[i % POOL_COPIES]
                buf[0:8] = zero
                append(MemoryRecords(buf))
            target.close()
        else:
            fd = os.open(directory / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for i in range(batches):
                    os.write(fd, copies[i % POOL_COPIES])
            finally:
                os.close(fd)
        return batches * len(template)
    total = 0
    if kind == "raw-scan":
        buf = bytearray(MIB)
        for path in sorted(p for p in part.iterdir() if p.name.endswith(".log")):
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    total += n
        return total
    if kind == "scan":
        target = Log.open(part, LogConfig())
        end = target.log_end_offset
        target.update_high_watermark(end)
        offset = 0
        while offset < end:
            data = target.read(offset, MIB, FetchIsolation.HIGH_WATERMARK).records.buffer
            size, offset = _next_offset(data)
            if size == 0:
                break
            total += size
            del data
        target.close()
        return total
    view = ReadOnlyLog.open(part)
    end = view.log_end_offset
    if kind == "readonly-scan":
        offset = 0
        while offset < end:
            data = view.read(offset, MIB).buffer
            size, offset = _next_offset(data)
            if size == 0:
                break
            total += size
            del data
        return total
    if kind == "columnar":
        for chunk in view.iter_batch_chunks(0, end):
            total += int(chunk.data.shape[0])
            for batch in iter_columnar(chunk.data):
                del batch
        return total
    raise ValueError(f"unknown worker {kind!r}")


def worker_main(argv: Sequence[str]) -> int:
    """``WORKER DIRECTORY BATCHES TEMPLATE_FILE``: import, warm up, measure, print one JSON line."""
    kind, directory, batches, template_path = argv
    import kafkalog.log
    import kafkalog.readonly.log
    import kafkalog.records.columnar
    from kafkalog.records.kernels import warm_up

    del kafkalog
    warm_up()
    template = Path(template_path).read_bytes()
    gc.collect()
    imports = read_status_kib("VmRSS")
    start = time.perf_counter()
    done = run_workload(kind, Path(directory), int(batches), template)
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "worker": kind,
                "imports_kib": imports,
                "peak_kib": read_status_kib("VmHWM"),
                "seconds": seconds,
                "bytes": done,
            }
        )
    )
    return 0


# ------------------------------------------------------------------------------------------------- parent


@dataclass(frozen=True)
class Peak:
    """What one worker subprocess reported (sizes in MiB)."""

    worker: str
    imports: float
    peak: float
    seconds: float
    nbytes: int

    @property
    def delta(self) -> float:
        """Peak RSS over the interpreter + imports RSS, MiB."""
        return self.peak - self.imports


def measure(kind: str, directory: Path, batches: int, template_file: Path) -> Peak:
    """One fresh ``python -m bench.bench_memory`` subprocess running worker ``kind``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_memory", kind, str(directory), str(batches), str(template_file)],
        cwd=_REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"memory worker {kind} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Peak(kind, data["imports_kib"] / KIB, data["peak_kib"] / KIB, data["seconds"], int(data["bytes"]))


@dataclass
class SizeResult:
    """Every run's :class:`Peak` at one data size, by worker."""

    size: int
    nbytes: int
    peaks: dict[str, list[Peak]]


def measure_size(tmp: Path, size: int, template: bytes, append_runs: int, scan_runs: int) -> SizeResult:
    """All workers at one size: ``append_runs`` append/raw-append pairs (each append into a new log), then
    ``scan_runs`` rounds of the scans over the last appended log; the log is deleted afterwards."""
    batches = max(1, size // len(template))
    template_file = tmp / "template.bin"
    template_file.write_bytes(template)
    work = tmp / "work"
    peaks: dict[str, list[Peak]] = {w: [] for w in WORKERS}
    try:
        for _ in range(append_runs):
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            peaks["append"].append(measure("append", work, batches, template_file))
            peaks["raw-append"].append(measure("raw-append", work, batches, template_file))
            (work / "raw.bin").unlink(missing_ok=True)
        nbytes = sum(p.stat().st_size for p in (work / "memory-0").iterdir() if p.name.endswith(".log"))
        for _ in range(scan_runs):
            for kind in ("scan", "raw-scan", "readonly-scan", "columnar"):
                peaks[kind].append(measure(kind, work, batches, template_file))
        for kind, runs in peaks.items():
            for peak in runs:
                if peak.nbytes != (batches * len(template) if "append" in kind else nbytes):
                    raise AssertionError(f"worker {kind} handled {peak.nbytes} bytes, expected {nbytes}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(
        f"{AREA}: {format_x(size, 'bytes')}: "
        + ", ".join(f"{k} {statistics.median(p.peak for p in v):.0f} MiB" for k, v in peaks.items() if v)
    )
    return SizeResult(size, nbytes, peaks)


def _stats(peaks: Sequence[Peak]) -> Stats:
    return Stats.of(p.peak for p in peaks)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def build_rows(results: Sequence[SizeResult]) -> list[Row]:
    """Rows per workload and size, then one "stays flat" row per workload (first size vs last)."""
    rows: list[Row] = []
    for workload, (ours, baseline, baseline_name) in WORKLOADS.items():
        for result in results:
            mine, theirs = result.peaks[ours], result.peaks[baseline]
            if not mine or not theirs:
                continue
            mine_s, theirs_s = _stats(mine), _stats(theirs)
            imports = _median([p.imports for p in mine + theirs])
            seconds = _median([p.seconds for p in mine])
            rows.append(
                Row(
                    area=AREA,
                    name=f"{workload}, {format_x(result.size, 'bytes')}: peak RSS",
                    value=mine_s.median,
                    unit="MiB",
                    baseline_name=baseline_name,
                    baseline_value=theirs_s.median,
                    spread=mine_s.spread,
                    baseline_spread=theirs_s.spread,
                    runs=min(len(mine), len(theirs)),
                    note=f"Interpreter + imports (kernels loaded): {imports:.0f} MiB; peak over it: ours "
                    f"{_median([p.delta for p in mine]):+.0f} MiB, baseline {_median([p.delta for p in theirs]):+.0f} "
                    f"MiB; ours − baseline {mine_s.median - theirs_s.median:+.0f} MiB. "
                    f"{result.nbytes / MIB:,.0f} MiB of .log data; ours took {seconds:.1f} s "
                    f"({result.nbytes / GIB / max(seconds, 1e-9):.2f} GiB/s); {len(mine)} fresh subprocess(es) "
                    "per side.",
                    series=workload,
                    x=float(result.size),
                    x_unit="bytes",
                )
            )
        flat = flatness_row(workload, ours, baseline, results)
        if flat is not None:
            rows.append(flat)
    return rows


def flatness_row(workload: str, ours: str, baseline: str, results: Sequence[SizeResult]) -> Row | None:
    """Growth of our peak RSS from the first size to the last, target :data:`FLAT`."""
    measured = [r for r in results if r.peaks[ours] and r.peaks[baseline]]
    if len(measured) < 2:
        return None
    small, large = measured[0], measured[-1]
    growth = _stats(large.peaks[ours]).median - _stats(small.peaks[ours]).median
    base_growth = _stats(large.peaks[baseline]).median - _stats(small.peaks[baseline]).median
    factor = large.size / small.size
    row = Row(
        area=AREA,
        name=f"{workload} stays flat: peak RSS at {format_x(large.size, 'bytes')} − at "
        f"{format_x(small.size, 'bytes')} ({factor:.0f}x the data)",
        value=growth,
        unit="MiB",
        baseline_name="the baseline's growth over the same sizes",
        baseline_value=base_growth,
        target=FLAT,
        runs=min(len(large.peaks[ours]), len(small.peaks[ours])),
        note=f"Median peak RSS: {_stats(small.peaks[ours]).median:.0f} MiB at {format_x(small.size, 'bytes')}, "
        f"{_stats(large.peaks[ours]).median:.0f} MiB at {format_x(large.size, 'bytes')}.",
    )
    row.passed = evaluate_target(FLAT, value=growth, unit="MiB", ratio=None)
    return row


def run(quick: bool) -> list[Row]:
    """The issue-#10 memory rows (see the module doc)."""
    from bench.bench_log import batch_of

    template = batch_of(16 * KIB)
    sizes = QUICK_SIZES if quick else SIZES
    append_runs = (3, 2) if quick else (3, 1)
    scan_runs = (3, 3) if quick else (3, 2)
    results = []
    with bench_tmpdir("kafkalog-bench-memory-") as tmp:
        for size, appends, scans in zip(sizes, append_runs, scan_runs):
            results.append(measure_size(tmp, size, template, appends, scans))
    return build_rows(results)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
