"""The benchmark harness: timing helpers, the :class:`Row` type, targets, the module registry, the machine.

Timing model
    A benchmark is a callable that does one run and returns a figure (a rate such as GiB/s or records/s;
    :func:`rate` turns "do the work once" into such a callable). :func:`sample` runs it ``warmup`` times
    unrecorded and then ``runs`` times, and summarises the figures as :class:`Stats` (median, min-max,
    quartiles). :func:`compare` does the same for "ours" and a baseline *interleaved* in ABBA order
    (ours, baseline, baseline, ours, ...) so that drift on a noisy VM hits both sides alike; its ratio is
    the median of the per-pair ratios ``ours_i / baseline_i`` (> 1 means ours is faster).

Rows
    Each module in :data:`REGISTRY` exposes ``run(quick: bool) -> list[Row]`` (plain ``dict`` rows with
    the same keys are accepted too, see :meth:`Row.from_dict`). A row's ``target`` is text such as
    ``">= 2.0x"`` (on the ratio) or ``">= 2 GiB/s"`` (on the value), clauses joined by ``and``;
    :func:`evaluate_target` turns it into ``passed``. :func:`discover` finds the area modules and
    :func:`run_area` runs one; :func:`machine_info` describes the machine they ran on.

Report and charts
    The report model, merging and the Markdown / JSON writers live in :mod:`bench.report`, the PNG charts
    in :mod:`bench.charts`; both build on this module and are imported from there (the imports are one-way:
    those modules import this one, never the reverse).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import importlib
import importlib.metadata
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FULL_RUNS",
    "QUICK_RUNS",
    "REGISTRY",
    "AreaResult",
    "Comparison",
    "Row",
    "Stats",
    "attainment",
    "compare",
    "comparison_row",
    "discover",
    "evaluate_target",
    "finalize_rows",
    "format_ratio",
    "format_value",
    "load_average",
    "load_warning",
    "log",
    "machine_info",
    "now_text",
    "rate",
    "ratio_threshold",
    "run_area",
    "runs_for",
    "sample",
    "single_row",
]

#: Recorded runs per figure in ``--quick`` mode and in the full run (each after at least one warm-up run).
QUICK_RUNS = 7
FULL_RUNS = 11

#: Benchmark modules in report order: area key (what ``--only`` takes) -> module name.
#: A module whose file is missing is skipped; other ``bench_*.py`` files are appended in name order.
REGISTRY: dict[str, str] = {
    "records": "bench.bench_records",
    "columnar": "bench.bench_columnar",
    "baselines": "bench.bench_baselines",
}

_PACKAGE_DIR = Path(__file__).resolve().parent
_T0 = time.perf_counter()


def log(message: str) -> None:
    """Progress line on stderr, prefixed with the seconds since the harness was imported."""
    print(f"[bench {time.perf_counter() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


def runs_for(quick: bool) -> int:
    """Number of recorded runs per figure: :data:`QUICK_RUNS` or :data:`FULL_RUNS`."""
    return QUICK_RUNS if quick else FULL_RUNS


# --------------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stats:
    """Summary of the per-run figures of one measurement."""

    median: float
    min: float
    max: float
    q1: float
    q3: float
    n: int
    samples: tuple[float, ...] = ()

    @classmethod
    def of(cls, samples: Iterable[float]) -> Stats:
        """Median, min, max and quartiles (inclusive method) of ``samples`` (at least one)."""
        values = tuple(float(s) for s in samples)
        if not values:
            raise ValueError("no samples")
        if len(values) == 1:
            q1 = q3 = values[0]
        else:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(statistics.median(values), min(values), max(values), q1, q3, len(values), values)

    @property
    def spread(self) -> tuple[float, float]:
        """``(min, max)`` over the runs."""
        return (self.min, self.max)

    @property
    def iqr(self) -> tuple[float, float]:
        """``(q1, q3)`` over the runs."""
        return (self.q1, self.q3)


@dataclass(frozen=True)
class Comparison:
    """Interleaved runs of ours and a baseline: each side's figures and the per-pair ratios."""

    ours: Stats
    baseline: Stats
    ratio: Stats


def _settle() -> None:
    """Collect garbage left by the previous run so that it is not charged to the next one."""
    gc.collect()


def rate(work: Callable[[], object], amount: float) -> Callable[[], float]:
    """A run callable: do ``work()`` once and return ``amount / seconds`` (e.g. bytes or records per second)."""

    def run_once() -> float:
        _settle()
        start = time.perf_counter()
        work()
        elapsed = time.perf_counter() - start
        return amount / max(elapsed, 1e-12)

    return run_once


def sample(run: Callable[[], float], runs: int, warmup: int = 1) -> Stats:
    """Call ``run`` ``warmup`` times unrecorded, then ``runs`` times; summarise the returned figures."""
    if runs < 1:
        raise ValueError("runs must be >= 1")
    for _ in range(warmup):
        run()
    return Stats.of(run() for _ in range(runs))


def compare(
    ours: Callable[[], float], baseline: Callable[[], float], runs: int, warmup: int = 1
) -> Comparison:
    """Run ours and the baseline interleaved (ABBA order after ``warmup`` rounds of each).

    Both callables return a figure where higher is better (a rate); the ratio of pair ``i`` is
    ``ours_i / baseline_i`` and :attr:`Comparison.ratio` summarises those ratios.
    """
    if runs < 1:
        raise ValueError("runs must be >= 1")
    for _ in range(warmup):
        ours()
        baseline()
    mine: list[float] = []
    theirs: list[float] = []
    for i in range(runs):
        if i % 2 == 0:
            mine.append(ours())
            theirs.append(baseline())
        else:
            theirs.append(baseline())
            mine.append(ours())
    ratios = [m / t if t > 0 else math.inf for m, t in zip(mine, theirs)]
    return Comparison(Stats.of(mine), Stats.of(theirs), Stats.of(ratios))


# ------------------------------------------------------------------------------------------------------ rows


def _pair(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if isinstance(value, Stats):
        return value.spread
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        return (float(value[0]), float(value[1]))
    return None


@dataclass
class Row:
    """One line of the report.

    ``value`` is our figure (median) in ``unit``; ``baseline_value`` the baseline's median in the same unit;
    ``ratio`` the median of per-pair ratios (ours / baseline, > 1 = ours faster). ``spread``,
    ``baseline_spread`` and ``ratio_spread`` are ``(min, max)`` over the runs. A row with no baseline *is*
    a baseline (or an absolute figure). ``passed`` is ``None`` when there is no target.

    ``series``, ``x`` and ``x_unit`` (all optional) place the row on a line chart: the row is the point
    ``x`` (in ``x_unit``, e.g. ``"bytes"`` or ``"segments"``) of the line ``series``; see the module doc.
    """

    area: str
    name: str
    value: float
    unit: str
    baseline_name: str | None = None
    baseline_value: float | None = None
    ratio: float | None = None
    target: str | None = None
    passed: bool | None = None
    spread: tuple[float, float] | None = None
    baseline_spread: tuple[float, float] | None = None
    ratio_spread: tuple[float, float] | None = None
    runs: int | None = None
    note: str = ""
    series: str | None = None
    x: float | None = None
    x_unit: str | None = None

    _FIELDS = frozenset(
        (
            "area",
            "name",
            "value",
            "unit",
            "baseline_name",
            "baseline_value",
            "ratio",
            "target",
            "passed",
            "spread",
            "baseline_spread",
            "ratio_spread",
            "runs",
            "note",
            "series",
            "x",
            "x_unit",
        )
    )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Row:
        """A row from a plain mapping (e.g. a module returning dicts, or the JSON report).

        ``area``, ``name``, ``value`` and ``unit`` are required. Spreads may be 2-element lists. A missing
        ratio is computed from ``value / baseline_value``; an explicit ``"ratio": null`` (what
        :meth:`to_dict` writes for a row that has a baseline but no ratio, e.g. peak RSS) stays ``None``.
        Unknown keys are kept in ``note``.
        """
        missing = [k for k in ("area", "name", "value", "unit") if data.get(k) is None]
        if missing:
            raise ValueError(f"benchmark row lacks {', '.join(missing)}: {dict(data)!r}")
        baseline_value = data.get("baseline_value")
        ratio = data.get("ratio")
        if "ratio" not in data and baseline_value:
            ratio = float(data["value"]) / float(baseline_value)
        extra = {k: v for k, v in data.items() if k not in cls._FIELDS}
        note = str(data.get("note") or "")
        if extra:
            note = "; ".join([*([note] if note else []), *(f"{k}: {v}" for k, v in sorted(extra.items()))])
        passed = data.get("passed")
        return cls(
            area=str(data["area"]),
            name=str(data["name"]),
            value=float(data["value"]),
            unit=str(data["unit"]),
            baseline_name=None if data.get("baseline_name") is None else str(data["baseline_name"]),
            baseline_value=None if baseline_value is None else float(baseline_value),
            ratio=None if ratio is None else float(ratio),
            target=data.get("target") or None,
            passed=None if passed is None else bool(passed),
            spread=_pair(data.get("spread")),
            baseline_spread=_pair(data.get("baseline_spread")),
            ratio_spread=_pair(data.get("ratio_spread")),
            runs=None if data.get("runs") is None else int(data["runs"]),
            note=note,
            series=None if data.get("series") is None else str(data["series"]),
            x=None if data.get("x") is None else float(data["x"]),
            x_unit=None if data.get("x_unit") is None else str(data["x_unit"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (spreads as 2-element lists)."""
        out = dataclasses.asdict(self)
        for key in ("spread", "baseline_spread", "ratio_spread"):
            if out[key] is not None:
                out[key] = list(out[key])
        return out


def comparison_row(
    area: str,
    name: str,
    unit: str,
    result: Comparison,
    baseline_name: str,
    target: str | None = None,
    note: str = "",
) -> Row:
    """A :class:`Row` from a :func:`compare` result (``passed`` evaluated from ``target``)."""
    row = Row(
        area=area,
        name=name,
        value=result.ours.median,
        unit=unit,
        baseline_name=baseline_name,
        baseline_value=result.baseline.median,
        ratio=result.ratio.median,
        target=target,
        spread=result.ours.spread,
        baseline_spread=result.baseline.spread,
        ratio_spread=result.ratio.spread,
        runs=result.ratio.n,
        note=note,
    )
    row.passed = evaluate_target(target, value=row.value, unit=unit, ratio=row.ratio)
    return row


def single_row(
    area: str, name: str, unit: str, stats: Stats, target: str | None = None, note: str = ""
) -> Row:
    """A :class:`Row` without a baseline (a baseline itself, or an absolute figure)."""
    row = Row(
        area=area,
        name=name,
        value=stats.median,
        unit=unit,
        target=target,
        spread=stats.spread,
        runs=stats.n,
        note=note,
    )
    row.passed = evaluate_target(target, value=row.value, unit=unit, ratio=None)
    return row


# --------------------------------------------------------------------------------------------------- targets

_CLAUSE = re.compile(
    r"^\s*(?P<op>>=|<=|>|<|≥|≤)\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<mult>[kMG](?![a-zA-Z]))?"
    r"\s*(?P<unit>.*?)\s*$"
)
_MULTIPLIERS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
_BYTE_RATES = {
    "b/s": 1.0,
    "kb/s": 1e3,
    "mb/s": 1e6,
    "gb/s": 1e9,
    "kib/s": 1024.0,
    "mib/s": 1024.0**2,
    "gib/s": 1024.0**3,
}
_RATIO_UNITS = {"x", "×"}


def _parse_clauses(target: str) -> list[tuple[str, float, str]] | None:
    clauses = []
    for part in re.split(r"\s+(?:and|AND)\s+|\s*&&?\s*", target.strip()):
        match = _CLAUSE.match(part)
        if match is None:
            return None
        op = {"≥": ">=", "≤": "<="}.get(match["op"], match["op"])
        number = float(match["num"]) * _MULTIPLIERS[match["mult"] or ""]
        clauses.append((op, number, match["unit"]))
    return clauses


def _in_unit(value: float, unit: str, target_unit: str) -> float | None:
    """``value`` (in ``unit``) expressed in ``target_unit``; ``None`` if they are not comparable."""
    if target_unit.strip().lower() == unit.strip().lower() or not target_unit.strip():
        return value
    src, dst = _BYTE_RATES.get(unit.strip().lower()), _BYTE_RATES.get(target_unit.strip().lower())
    if src is None or dst is None:
        return None
    return value * src / dst


def _measured(clause_unit: str, value: float, unit: str, ratio: float | None) -> float | None:
    if clause_unit.strip() in _RATIO_UNITS:
        return ratio
    return _in_unit(value, unit, clause_unit)


def evaluate_target(target: str | None, *, value: float, unit: str, ratio: float | None) -> bool | None:
    """Whether the figures meet ``target`` (every ``and`` clause); ``None`` if there is none or it cannot be read.

    ``">= 2x"`` applies to the ratio; ``">= 2 GiB/s"`` to the value (byte rates convert between B/s, MiB/s,
    GiB/s ...; other units must match the row's unit, a ``k``/``M``/``G`` multiplier is allowed:
    ``">= 1M records/s"``).
    """
    if not target:
        return None
    clauses = _parse_clauses(target)
    if not clauses:
        return None
    verdict = True
    for op, threshold, clause_unit in clauses:
        measured = _measured(clause_unit, value, unit, ratio)
        if measured is None or math.isnan(measured):
            return None
        ok = {
            ">=": measured >= threshold,
            ">": measured > threshold,
            "<=": measured <= threshold,
            "<": measured < threshold,
        }[op]
        verdict = verdict and ok
    return verdict


def attainment(row: Row) -> float | None:
    """How close the row comes to its target: the worst ``measured / threshold`` over its ``>=`` clauses.

    1.0 or more means met; 0.5 means "half of what the target asks". ``None`` without a readable target.
    """
    if not row.target:
        return None
    clauses = _parse_clauses(row.target)
    if not clauses:
        return None
    worst: float | None = None
    for op, threshold, clause_unit in clauses:
        measured = _measured(clause_unit, row.value, row.unit, row.ratio)
        if measured is None or threshold <= 0:
            return None
        frac = measured / threshold if op in (">=", ">") else threshold / measured if measured else math.inf
        worst = frac if worst is None else min(worst, frac)
    return worst


def ratio_threshold(target: str | None) -> float | None:
    """The ratio ``target`` asks for: the threshold of its first clause on the ratio (``2.0`` for
    ``">= 2x and >= 1 GiB/s"``); ``None`` without a target, without a ratio clause or when it cannot be read."""
    if not target:
        return None
    for _, threshold, unit in _parse_clauses(target) or []:
        if unit.strip() in _RATIO_UNITS:
            return threshold
    return None


def finalize_rows(rows: Iterable[Row | Mapping[str, Any]]) -> list[Row]:
    """Normalise module output to :class:`Row` objects and fill ``passed`` from ``target`` where unset."""
    out = []
    for item in rows:
        row = item if isinstance(item, Row) else Row.from_dict(item)
        if row.passed is None and row.target:
            row.passed = evaluate_target(row.target, value=row.value, unit=row.unit, ratio=row.ratio)
        out.append(row)
    return out


# -------------------------------------------------------------------------------------------------- registry


def discover(package_dir: Path = _PACKAGE_DIR, package: str = "bench") -> dict[str, str]:
    """Benchmark modules that exist: :data:`REGISTRY` order first, then other ``bench_*.py`` by name.

    Returns area key -> module name. Only files are looked at here; nothing is imported.
    """
    found: dict[str, str] = {}
    for area, module in REGISTRY.items():
        prefix, _, leaf = module.rpartition(".")
        if prefix == package and (package_dir / f"{leaf}.py").is_file():
            found[area] = module
    for path in sorted(package_dir.glob("bench_*.py")):
        module = f"{package}.{path.stem}"
        if module not in found.values():
            found[path.stem.removeprefix("bench_")] = module
    return found


@dataclass
class AreaResult:
    """What running one benchmark module produced: its rows, or the error that stopped it."""

    area: str
    rows: list[Row]
    seconds: float
    error: str | None = None


def run_area(area: str, module_name: str, quick: bool) -> AreaResult:
    """Import ``module_name`` and call its ``run(quick)``; an exception becomes :attr:`AreaResult.error`."""
    start = time.perf_counter()
    try:
        module = importlib.import_module(module_name)
        run = getattr(module, "run", None)
        if not callable(run):
            raise TypeError(f"{module_name} has no run(quick) function")
        rows = finalize_rows(run(quick))
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc, limit=-3)).strip()
        return AreaResult(area, [], time.perf_counter() - start, detail)
    return AreaResult(area, rows, time.perf_counter() - start)


# ------------------------------------------------------------------------------------------------ machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "?"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_head() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=_PACKAGE_DIR.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.stdout.strip() or "?"


def machine_info() -> dict[str, str]:
    """CPU, cores, memory, OS, Python and the versions of the packages the benchmarks exercise."""
    import sqlite3

    info = {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count() or "?"),
        "memory": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }
    for dist in ("numpy", "numba", "crc32c", "zstandard", "kafka-python", "lmdb", "persist-queue"):
        info[dist] = _version(dist)
    try:
        import crc32c

        info["crc32c"] += f" (hardware_based={getattr(crc32c, 'hardware_based', '?')})"
    except ImportError:
        pass
    info["sqlite"] = sqlite3.sqlite_version
    info["git HEAD"] = _git_head()
    info["load average at start"] = load_average()
    return info


def load_warning(machine: Mapping[str, str]) -> str | None:
    """A warning when the 1-minute load average at the start or end of the run exceeded half the cores:
    other processes then competed for the CPU and the absolute figures are depressed."""
    try:
        cores = int(machine.get("cores", "0"))
    except ValueError:
        return None
    loads = []
    for key in ("load average at start", "load average at end"):
        try:
            loads.append(float(machine.get(key, "").split("/")[0]))
        except ValueError:
            continue
    if not cores or not loads or max(loads) <= cores / 2:
        return None
    return (
        f"the 1-minute load average reached {max(loads):.1f} on {cores} cores during this run, so other "
        "processes competed for the CPU: absolute figures are depressed (the baselines' too). Ratios "
        "hold up better because each pair runs back to back; rerun on a quiet machine for absolute "
        "targets."
    )


def load_average() -> str:
    """The 1/5/15-minute load averages (other work on a shared machine skews the absolute figures)."""
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


# -------------------------------------------------------------------------------------------------- report


# ------------------------------------------------------------------------------------------------- formatting


_COUNT_RATE = re.compile(r"^(?P<what>[A-Za-z ]+)/s$")


def format_value(value: float | None, unit: str) -> str:
    """``3.41 GiB/s``, ``275k records/s``, ``1.51M ops/s`` (three significant digits)."""
    if value is None or math.isnan(value):
        return "—"
    if unit.lower().endswith("b/s") and unit.lower() != "b/s":
        return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    if _COUNT_RATE.match(unit) or unit in ("ops", "records", "rows", "items"):
        for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= div:
                scaled = value / div
                return f"{scaled:.3g}{suffix} {unit}" if scaled < 100 else f"{scaled:.0f}{suffix} {unit}"
        return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{value:.3g} {unit}"


def format_ratio(ratio: float | None) -> str:
    """``2.31x``; two significant digits below 0.1 (``0.033x``); ``—`` when absent."""
    if ratio is None or math.isnan(ratio):
        return "—"
    if 0 < ratio < 0.1:
        return f"{ratio:.2g}x"
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.0f}x"


# ---------------------------------------------------------------------------------------------------- helpers


def now_text() -> str:
    """The current UTC time as ``YYYY-MM-DD HH:MM UTC``."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def load_kafka_java() -> Any:
    """The interop harness ``tests/interop/kafka_java.py`` (Kafka's own Java record code), loaded once as a
    module for the Java reference rows; None when the file is not there (an installed package)."""
    path = Path(__file__).resolve().parent.parent / "tests" / "interop" / "kafka_java.py"
    name = "kafkalog_bench_kafka_java"
    if name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses/typing need the module registered while it executes
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return module
