"""The benchmark harness: timing helpers, the :class:`Row` type, the module registry and the report writer.

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
    :func:`evaluate_target` turns it into ``passed``.

Report
    :func:`write_report` writes the Markdown report, the JSON twin and one PNG chart per area.
    :func:`merge_reports` replaces some areas of an earlier report with a fresh run of just those areas
    (``python -m bench --only ... --merge``); the merged :class:`Report` records each such re-run as a
    :class:`Rerun` (when, which areas, which machine and load), and the Markdown header says which areas
    come from which run.

Charts
    By default an area's chart is a bar chart: ours ÷ baseline per row (with the min–max spread), or the
    values themselves for an area of baselines. An area whose rows carry a position on an x axis
    (:attr:`Row.series`, :attr:`Row.x` and :attr:`Row.x_unit`, e.g. "append" at 1 GiB of "bytes") gets a
    *line* chart instead: one panel per x unit, one line per series over a log-scale x axis, showing the
    ratio (or, for rows without a ratio, ours solid and the baseline dashed), so that growth with size
    reads as a slope. Rows of such an area without an x (summary rows) are left out of the chart.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import importlib
import importlib.metadata
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FULL_RUNS",
    "QUICK_RUNS",
    "REGISTRY",
    "AreaResult",
    "Comparison",
    "Report",
    "Rerun",
    "Row",
    "Stats",
    "attainment",
    "chart_path",
    "compare",
    "comparison_row",
    "discover",
    "evaluate_target",
    "finalize_rows",
    "format_ratio",
    "format_value",
    "format_x",
    "line_rows",
    "load_average",
    "load_warning",
    "log",
    "machine_info",
    "merge_reports",
    "now_text",
    "rate",
    "render_markdown",
    "run_area",
    "runs_for",
    "sample",
    "single_row",
    "write_charts",
    "write_json",
    "write_report",
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


@dataclass
class Rerun:
    """A later run of some areas (``python -m bench --only ... --merge``) merged into a report.

    ``areas`` are the areas whose rows (and failures, timings, charts) now come from this run, in report
    order; ``new_areas`` those among them that the report did not hold before. ``started``, ``seconds``,
    ``command`` and ``machine`` describe this run as :class:`Report`'s fields describe the original one.
    """

    areas: list[str]
    started: str
    seconds: float
    command: str
    machine: dict[str, str]
    new_areas: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {
            "areas": list(self.areas),
            "new_areas": list(self.new_areas),
            "command": self.command,
            "started": self.started,
            "seconds": round(self.seconds, 1),
            "machine": dict(self.machine),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rerun:
        """Inverse of :meth:`to_dict`."""
        return cls(
            areas=[str(a) for a in data.get("areas", [])],
            started=str(data.get("started", "?")),
            seconds=float(data.get("seconds", 0.0)),
            command=str(data.get("command", "python -m bench")),
            machine={str(k): str(v) for k, v in data.get("machine", {}).items()},
            new_areas=[str(a) for a in data.get("new_areas", [])],
        )


@dataclass
class Report:
    """Everything one ``python -m bench`` invocation measured.

    ``started``, ``seconds``, ``command`` and ``machine`` describe that run. A report merged by
    :func:`merge_reports` also lists in ``reruns`` the later runs whose areas replaced the original ones.
    """

    rows: list[Row]
    machine: dict[str, str]
    quick: bool
    started: str
    seconds: float
    area_seconds: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    command: str = "python -m bench"
    reruns: list[Rerun] = field(default_factory=list)

    def areas(self) -> list[str]:
        """Areas in the order their rows (or failures) appear."""
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.setdefault(row.area, None)
        for area in self.area_seconds:
            seen.setdefault(area, None)
        return list(seen)

    def original_areas(self) -> list[str]:
        """The areas whose figures still come from the original run (not replaced by a re-run)."""
        rerun = {area for run in self.reruns for area in run.areas}
        return [area for area in self.areas() if area not in rerun]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (``reruns`` only for a merged report)."""
        out: dict[str, Any] = {
            "command": self.command,
            "mode": "quick" if self.quick else "full",
            "started": self.started,
            "seconds": round(self.seconds, 1),
            "area_seconds": {k: round(v, 1) for k, v in self.area_seconds.items()},
            "machine": self.machine,
            "failures": self.failures,
        }
        if self.reruns:
            out["reruns"] = [run.to_dict() for run in self.reruns]
        out["rows"] = [row.to_dict() for row in self.rows]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """Inverse of :meth:`to_dict` (to re-render a report from ``docs/benchmarks.json``)."""
        return cls(
            rows=[Row.from_dict(row) for row in data.get("rows", [])],
            machine={str(k): str(v) for k, v in data.get("machine", {}).items()},
            quick=data.get("mode") == "quick",
            started=str(data.get("started", "?")),
            seconds=float(data.get("seconds", 0.0)),
            area_seconds={str(k): float(v) for k, v in data.get("area_seconds", {}).items()},
            failures={str(k): str(v) for k, v in data.get("failures", {}).items()},
            command=str(data.get("command", "python -m bench")),
            reruns=[Rerun.from_dict(run) for run in data.get("reruns", [])],
        )


def merge_reports(base: Report, fresh: Report, areas: Iterable[str], order: Sequence[str] = ()) -> Report:
    """``base`` with the given ``areas`` replaced by what ``fresh`` (a run of just those areas) measured.

    Every area ``fresh`` ran (``areas``, plus any area its rows, timings or failures name) loses its rows,
    timing and failure in ``base`` and takes ``fresh``'s; the other areas' rows are kept as they were.
    Areas are laid out in ``order`` (e.g. :func:`bench.__main__.ordered_areas`), then in the order ``base``
    and ``fresh`` list them. The result keeps ``base``'s run description (command, start, machine) and
    appends ``fresh`` to :attr:`Report.reruns`; an earlier re-run loses the areas re-run again (and is
    dropped when none is left). Raises :class:`ValueError` when the modes (quick / full) differ.
    """
    if base.quick != fresh.quick:
        raise ValueError(
            f"cannot merge a {'quick' if fresh.quick else 'full'} run into a "
            f"{'quick' if base.quick else 'full'} report"
        )
    replaced = set(areas) | set(fresh.areas()) | set(fresh.failures)
    before = [*base.areas(), *base.failures]
    known = list(dict.fromkeys([*before, *fresh.areas(), *fresh.failures, *areas]))
    rank = {area: i for i, area in enumerate(dict.fromkeys(order))}
    layout = sorted(known, key=lambda area: (rank.get(area, len(rank)), known.index(area)))
    position = {area: i for i, area in enumerate(layout)}

    rows = [row for row in base.rows if row.area not in replaced] + list(fresh.rows)
    rows.sort(key=lambda row: position[row.area])  # stable: each area keeps its own row order

    def merged(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
        both = {**{k: v for k, v in old.items() if k not in replaced}, **new}
        return dict(sorted(both.items(), key=lambda item: position[item[0]]))

    reruns = []
    for run in base.reruns:
        kept = [area for area in run.areas if area not in replaced]
        if kept:
            new_areas = [area for area in run.new_areas if area in kept]
            reruns.append(dataclasses.replace(run, areas=kept, new_areas=new_areas))
    this_run = [area for area in layout if area in replaced]
    reruns.append(
        Rerun(
            areas=this_run,
            started=fresh.started,
            seconds=fresh.seconds,
            command=fresh.command,
            machine=dict(fresh.machine),
            new_areas=[area for area in this_run if area not in before],
        )
    )
    return Report(
        rows=rows,
        machine=dict(base.machine),
        quick=base.quick,
        started=base.started,
        seconds=base.seconds,
        area_seconds=merged(base.area_seconds, fresh.area_seconds),
        failures=merged(base.failures, fresh.failures),
        command=base.command,
        reruns=reruns,
    )


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


def _format_number(value: float, unit: str) -> str:
    """Like :func:`format_value` but without the unit (for spreads)."""
    text = format_value(value, unit)
    return text[: -len(unit) - 1] if text.endswith(" " + unit) else text


def format_ratio(ratio: float | None) -> str:
    """``2.31x``; two significant digits below 0.1 (``0.033x``); ``—`` when absent."""
    if ratio is None or math.isnan(ratio):
        return "—"
    if 0 < ratio < 0.1:
        return f"{ratio:.2g}x"
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.0f}x"


def _spread_text(spread: tuple[float, float] | None, unit: str | None) -> str:
    if spread is None:
        return "—"
    if unit is None:
        return f"{format_ratio(spread[0])}–{format_ratio(spread[1])}"
    return f"{_format_number(spread[0], unit)}–{_format_number(spread[1], unit)}"


def _result_text(row: Row) -> str:
    if row.passed is None:
        return "—" if not row.target else "?"
    if row.passed:
        return "pass"
    frac = attainment(row)
    return "**short**" if frac is None else f"**short** ({frac:.0%} of target)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_HOW_TO_READ = """\
Each figure is the **median of {runs} runs** taken after at least one unrecorded warm-up run; the
spread columns give **min–max** over those runs. "Ours" and its baseline run **in the same process,
interleaved** (ours, baseline, baseline, ours, …) on the same input, and **ratio = ours ÷ baseline**
is the median of the per-pair ratios, so a ratio above 1 means kafkalog is faster. Absolute figures on
this shared 2-vCPU VM move by up to 2x from one run to the next (other work on the machine, page-cache
state, CPU frequency), so compare *ratios* across reports, not absolute numbers. Targets are quoted from
the issues; "pass" means the median meets every clause of the target and "short" says what fraction of
the target was reached. Rows without a baseline are baselines themselves (raw I/O, SQLite, LMDB,
persist-queue), kept for later comparisons. `--quick` uses smaller inputs and {quick_runs} runs; the
full run (`make bench`) uses {full_runs}."""


def _area_list(areas: Sequence[str]) -> str:
    """``area log`` / ``areas log, server``."""
    return f"{'area' if len(areas) == 1 else 'areas'} {', '.join(areas)}"


def _load_text(machine: Mapping[str, str]) -> str:
    """``load average 0.52 / 0.40 / 0.31 at start, 1.10 / 0.70 / 0.45 at end`` from :func:`machine_info`."""
    parts = [
        f"{machine[f'load average at {when}']} at {when}"
        for when in ("start", "end")
        if machine.get(f"load average at {when}")
    ]
    return "load average " + (", ".join(parts) if parts else "not recorded")


def _merge_text(report: Report) -> str:
    """The header sentence of a merged report: which areas were re-run when (and under what load), and
    which still come from the original run."""
    clauses = []
    for run in report.reruns:
        old = [area for area in run.areas if area not in run.new_areas]
        new = [area for area in run.areas if area in run.new_areas]
        what = " and ".join(
            [*([f"{_area_list(old)} re-run"] if old else []), *([f"{_area_list(new)} added"] if new else [])]
        )
        clauses.append(
            f"{what} on {run.started} by `{run.command}` in {run.seconds:.0f} s ({_load_text(run.machine)})"
        )
    originals = report.original_areas()
    if originals:
        clauses.append(
            f"the others ({', '.join(originals)}) from the run of {report.started} "
            f"({_load_text(report.machine)})"
        )
    else:
        clauses.append(f"no area is left from the run of {report.started}")
    return "Merged report: " + "; ".join(clauses) + ". The Machine section describes each run."


def _machine_lines(report: Report) -> list[str]:
    """The Machine table: one value column, or one per run for a merged report."""
    if not report.reruns:
        return ["| | |", "|---|---|", *(f"| {_cell(k)} | {_cell(v)} |" for k, v in report.machine.items())]
    originals = report.original_areas()
    first = f"run of {report.started}" + (f" ({', '.join(originals)})" if originals else " (no area left)")
    columns = [(first, report.machine)]
    columns += [(f"re-run of {run.started} ({', '.join(run.areas)})", run.machine) for run in report.reruns]
    keys = list(dict.fromkeys(key for _, machine in columns for key in machine))
    lines = ["| | " + " | ".join(_cell(title) for title, _ in columns) + " |"]
    lines.append("|---|" + "---|" * len(columns))
    for key in keys:
        values = " | ".join(_cell(machine.get(key, "—")) for _, machine in columns)
        lines.append(f"| {_cell(key)} | {values} |")
    return lines


def render_markdown(report: Report, charts: Mapping[str, str] | None = None) -> str:
    """The ``docs/benchmarks.md`` text: header, how-to-read, summary of targets, machine, one table per area.

    For a merged report (:attr:`Report.reruns`) the header also says which areas were re-run when, under
    what load, and which come from the original run; the Machine table then has a column per run.
    """
    charts = charts or {}
    runs = QUICK_RUNS if report.quick else FULL_RUNS
    lines = [
        "# Benchmarks",
        "",
        f"{'Originally generated' if report.reruns else 'Generated'} by `{report.command}` "
        f"({'quick' if report.quick else 'full'} mode) on "
        f"{report.started}, in {report.seconds:.0f} s. Do not edit by hand: run `make bench` "
        "(or `make bench-quick`) to regenerate this file, `docs/benchmarks.json` and the charts in "
        "`docs/benchmarks/`.",
        "",
    ]
    if report.reruns:
        lines += [_merge_text(report), ""]
    lines += [
        "## How to read this",
        "",
        _HOW_TO_READ.format(runs=runs, quick_runs=QUICK_RUNS, full_runs=FULL_RUNS),
        "",
    ]
    if report.original_areas() or not report.reruns:
        warning = load_warning(report.machine)
        if warning:
            label = f" (run of {report.started})" if report.reruns else ""
            lines += [f"> **Note{label}:** {warning}", ""]
    for run in report.reruns:
        warning = load_warning(run.machine)
        if warning:
            lines += [f"> **Note ({_area_list(run.areas)} re-run on {run.started}):** {warning}", ""]
    targeted = [row for row in report.rows if row.target]
    if targeted:
        met = sum(1 for row in targeted if row.passed)
        lines += [
            "## Targets",
            "",
            f"{met} of {len(targeted)} targets met.",
            "",
            "| Area | Benchmark | Ours | Ratio | Target | Result |",
            "|---|---|---|---|---|---|",
        ]
        for row in targeted:
            lines.append(
                f"| {_cell(row.area)} | {_cell(row.name)} | {format_value(row.value, row.unit)} | "
                f"{format_ratio(row.ratio)} | {_cell(row.target or '')} | {_result_text(row)} |"
            )
        lines.append("")
    if report.failures:
        lines += ["## Failed areas", ""]
        for area, error in report.failures.items():
            lines += [f"**{area}** raised:", "", "```text", error, "```", ""]
    lines += ["## Machine", "", *_machine_lines(report), ""]
    for area in report.areas():
        rows = [row for row in report.rows if row.area == area]
        if not rows:
            continue
        seconds = report.area_seconds.get(area)
        lines += [f"## {area}", ""]
        if seconds is not None:
            lines += [f"Measured in {seconds:.0f} s.", ""]
        if area in charts:
            lines += [f"![{area}]({charts[area]})", ""]
        notes: list[str] = []

        def note_ref(row: Row, notes: list[str] = notes) -> str:
            if not row.note:
                return ""
            notes.append(row.note)
            return f" [{len(notes)}]"

        if any(row.baseline_name for row in rows):
            lines += [
                "| Benchmark | Ours | Spread | Baseline | Baseline value | Baseline spread | Ratio "
                "| Ratio spread | Target | Result |",
                "|---|---:|---:|---|---:|---:|---:|---:|---|---|",
            ]
            for row in rows:
                lines.append(
                    f"| {_cell(row.name)}{note_ref(row)} | {format_value(row.value, row.unit)} | "
                    f"{_spread_text(row.spread, row.unit)} | {_cell(row.baseline_name or '—')} | "
                    f"{format_value(row.baseline_value, row.unit)} | "
                    f"{_spread_text(row.baseline_spread, row.unit)} | {format_ratio(row.ratio)} | "
                    f"{_spread_text(row.ratio_spread, None)} | {_cell(row.target or '—')} | "
                    f"{_result_text(row)} |"
                )
        else:
            lines += ["| Measurement | Median | Spread | Target | Result |", "|---|---:|---:|---|---|"]
            for row in rows:
                lines.append(
                    f"| {_cell(row.name)}{note_ref(row)} | {format_value(row.value, row.unit)} | "
                    f"{_spread_text(row.spread, row.unit)} | {_cell(row.target or '—')} | "
                    f"{_result_text(row)} |"
                )
        if notes:
            lines.append("")
            lines += [f"{i}. {_cell(text)}" for i, text in enumerate(notes, 1)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_json(report: Report, path: Path) -> None:
    """``report`` as indented JSON at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "area"


def chart_path(directory: Path, area: str) -> Path:
    """Where :func:`write_charts` puts ``area``'s PNG in ``directory``."""
    return directory / f"{_slug(area)}.png"


def write_charts(report: Report, directory: Path, skip: Collection[str] = ()) -> dict[str, Path]:
    """One PNG per area in ``directory`` (matplotlib, Agg): a line chart for an area whose rows carry an
    x position (see :func:`line_rows`), else ratios with their spread for areas with baselines, values per
    unit (log scale) for baseline-only areas. Areas in ``skip`` are not drawn. Returns area -> PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for area in report.areas():
        rows = [row for row in report.rows if row.area == area]
        if not rows or area in skip:
            continue
        path = chart_path(directory, area)
        compared = [row for row in rows if row.ratio is not None]
        lined = line_rows(rows)
        if lined:
            fig = _line_chart(plt, area, lined)
        elif compared:
            fig = _ratio_chart(plt, area, compared)
        else:
            fig = _value_chart(plt, area, rows)
        _save_png(fig, path)
        plt.close(fig)
        written[area] = path
    return written


def _save_png(fig: Any, path: Path, dpi: int = 80, colors: int = 96) -> None:
    """Save ``fig`` as a small PNG: rendered by Agg, then reduced to a ``colors``-entry palette (the charts
    are flat colours and text, so this keeps them legible at a fraction of the size)."""
    import io

    from PIL import Image

    raw = io.BytesIO()
    fig.savefig(raw, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    raw.seek(0)
    with Image.open(raw) as image:
        image.convert("RGB").quantize(colors=colors).save(path, format="PNG", optimize=True)


def _short(name: str, width: int = 56) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _ratio_chart(plt: Any, area: str, rows: Sequence[Row]) -> Any:
    """Horizontal bars of ours ÷ baseline per row; a log axis when the ratios span more than 20x."""
    names = [_short(f"{row.name} | vs {row.baseline_name}", 72) for row in rows]
    ratios = [max(row.ratio or 0.0, 1e-6) for row in rows]
    lo = [max(0.0, r - (row.ratio_spread or (r, r))[0]) for r, row in zip(ratios, rows)]
    hi = [max(0.0, (row.ratio_spread or (r, r))[1] - r) for r, row in zip(ratios, rows)]
    colors = ["#4c9a2a" if row.passed else "#c0392b" if row.passed is False else "#7f8c8d" for row in rows]
    thresholds = [t for t in map(_ratio_threshold, rows) if t]
    xmax = max([*(r + h for r, h in zip(ratios, hi)), *thresholds, 1.0])
    xmin = min([*(r - lo_ for r, lo_ in zip(ratios, lo)), *thresholds, 1.0])
    log_scale = xmax / max(xmin, 1e-6) > 20
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.3))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, ratios, xerr=[lo, hi], color=colors, capsize=3, height=0.6)
    for yi, row, r, h in zip(y, rows, ratios, hi):
        threshold = _ratio_threshold(row)
        if threshold is not None:
            ax.plot([threshold, threshold], [yi - 0.4, yi + 0.4], color="black", linewidth=2)
        label = format_ratio(row.ratio)
        if row.target and threshold is None:
            label += f"  ({format_value(row.value, row.unit)}; target {row.target})"
        x = (r + h) * 1.08 if log_scale else r + h + 0.02 * xmax
        ax.text(x, yi, label, va="center", fontsize=7)
    ax.axvline(1.0, color="#555555", linestyle="--", linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    scale_note = "; log scale" if log_scale else ""
    ax.set_xlabel(f"ours ÷ baseline: median, min–max bar; black tick = ratio target{scale_note}", fontsize=8)
    ax.set_title(f"{area} (green: target met, red: short, grey: no target; dashed: parity)", fontsize=9)
    if log_scale:
        ax.set_xscale("log")
        ax.set_xlim(max(xmin, 1e-6) / 2, xmax * 12)
    else:
        ax.set_xlim(0, xmax * 1.45)
    fig.tight_layout()
    return fig


def _ratio_threshold(row: Row) -> float | None:
    if not row.target:
        return None
    for _, threshold, unit in _parse_clauses(row.target) or []:
        if unit.strip() in _RATIO_UNITS:
            return threshold
    return None


def line_rows(rows: Iterable[Row]) -> list[Row]:
    """The rows that are points of a line chart: those with a ``series`` and an ``x``."""
    return [row for row in rows if row.series and row.x is not None]


_BYTE_STEPS = ((1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"))
_LINE_COLORS = ("#2e86c1", "#c0392b", "#4c9a2a", "#8e44ad", "#d68910", "#17a589", "#7f8c8d")


def format_x(x: float, unit: str | None) -> str:
    """A tick label for an x position: ``16 MiB`` / ``1 GiB`` for ``bytes``, ``10,000`` otherwise."""
    if (unit or "").strip().lower() in ("bytes", "b", "byte"):
        for div, suffix in _BYTE_STEPS:
            if abs(x) >= div:
                return f"{x / div:.3g} {suffix}"
        return f"{x:.0f} B"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:.3g}"


def _line_panels(rows: Sequence[Row]) -> dict[tuple[str, str | None], list[Row]]:
    """Rows by panel: ``(x unit, None)`` for ratio panels, ``(x unit, value unit)`` for value panels."""
    panels: dict[tuple[str, str | None], list[Row]] = {}
    for row in rows:
        key = (row.x_unit or "", None if row.ratio is not None else row.unit)
        panels.setdefault(key, []).append(row)
    return panels


def _line_chart(plt: Any, area: str, rows: Sequence[Row]) -> Any:
    """One panel per x unit: a line per series of ours ÷ baseline (median, min–max whiskers) over a log x
    axis; for rows without a ratio, the values (ours solid, baseline dashed) instead."""
    panels = _line_panels(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.6), squeeze=False)
    for ax, ((x_unit, value_unit), group) in zip(axes[0], panels.items()):
        by_series: dict[str, list[Row]] = {}
        for row in group:
            by_series.setdefault(row.series or "", []).append(row)
        ys_all: list[float] = []
        for i, (name, points) in enumerate(by_series.items()):
            points = sorted(points, key=lambda r: r.x or 0.0)
            color = _LINE_COLORS[i % len(_LINE_COLORS)]
            xs = [float(r.x or 0.0) for r in points]
            if value_unit is None:
                ys = [max(float(r.ratio or 0.0), 1e-9) for r in points]
                spreads = [r.ratio_spread or (y, y) for r, y in zip(points, ys)]
                err = [
                    [max(0.0, y - s[0]) for y, s in zip(ys, spreads)],
                    [max(0.0, s[1] - y) for y, s in zip(ys, spreads)],
                ]
                ax.errorbar(xs, ys, yerr=err, color=color, marker="o", capsize=3, label=name)
                ys_all += [s[0] for s in spreads] + [s[1] for s in spreads]
            else:
                ys = [r.value for r in points]
                spreads = [r.spread or (y, y) for r, y in zip(points, ys)]
                err = [
                    [max(0.0, y - s[0]) for y, s in zip(ys, spreads)],
                    [max(0.0, s[1] - y) for y, s in zip(ys, spreads)],
                ]
                ax.errorbar(xs, ys, yerr=err, color=color, marker="o", capsize=3, label=f"{name} (ours)")
                ys_all += ys
                based = [(x, r.baseline_value) for x, r in zip(xs, points) if r.baseline_value is not None]
                if based:
                    ax.plot(
                        [b[0] for b in based],
                        [b[1] for b in based],
                        color=color,
                        marker="s",
                        linestyle="--",
                        alpha=0.7,
                        label=f"{name} (baseline)",
                    )
                    ys_all += [float(b[1] or 0.0) for b in based]
            for x, y, r in zip(xs, ys, points):
                label = format_ratio(r.ratio) if value_unit is None else format_value(r.value, r.unit)
                ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6, color=color)
        ax.set_xscale("log")
        positive = [y for y in ys_all if y > 0]
        if value_unit is None:
            ax.axhline(1.0, color="#555555", linestyle="--", linewidth=1)
            positive.append(1.0)
        if positive and max(positive) / min(positive) > 20:
            ax.set_yscale("log")
        elif positive:
            ax.set_ylim(0, max(positive) * 1.25)
        ticks = sorted({float(r.x or 0.0) for r in group})
        ax.set_xticks(ticks)
        ax.set_xticklabels([format_x(t, x_unit) for t in ticks], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel(f"{x_unit or 'x'} (log scale)", fontsize=8)
        if value_unit is None:
            ax.set_ylabel("ours ÷ baseline (median, min–max)", fontsize=8)
        else:
            ax.set_ylabel(f"{value_unit} (median, min–max)", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"{area}: by {x_unit or 'x'}", fontsize=9)
    fig.tight_layout()
    return fig


def _value_chart(plt: Any, area: str, rows: Sequence[Row]) -> Any:
    units: dict[str, list[Row]] = {}
    for row in rows:
        units.setdefault(row.unit, []).append(row)
    heights = [0.42 * len(group) + 0.7 for group in units.values()]
    fig, axes = plt.subplots(
        len(units), 1, figsize=(8, sum(heights) + 0.6), gridspec_kw={"height_ratios": heights}, squeeze=False
    )
    for ax, (unit, group) in zip(axes[:, 0], units.items()):
        y = list(range(len(group)))[::-1]
        values = [row.value for row in group]
        lo = [v - (row.spread or (v, v))[0] for v, row in zip(values, group)]
        hi = [(row.spread or (v, v))[1] - v for v, row in zip(values, group)]
        ax.barh(y, values, xerr=[lo, hi], color="#2e86c1", capsize=3, height=0.6)
        ax.set_xscale("log")
        ax.set_yticks(y)
        ax.set_yticklabels([_short(row.name) for row in group], fontsize=8)
        for yi, row, v, h in zip(y, group, values, hi):
            ax.text((v + h) * 1.15, yi, format_value(row.value, unit), va="center", fontsize=7)
        ax.set_xlim(min(values) / 3, max(v + h for v, h in zip(values, hi)) * 10)
        ax.set_xlabel(f"{unit} (median, min–max; log scale)", fontsize=8)
    axes[0, 0].set_title(f"{area}", fontsize=9)
    fig.tight_layout()
    return fig


def write_report(
    report: Report,
    markdown_path: Path,
    json_path: Path | None = None,
    charts_dir: Path | None = None,
    charts: bool = True,
    keep_charts: Collection[str] = (),
) -> dict[str, Path]:
    """Write the Markdown report, its JSON twin (default: same name, ``.json``) and the charts (default
    directory: ``<markdown dir>/<markdown stem>/``). Returns what was written, by kind.

    Areas in ``keep_charts`` (those a merge kept, see :func:`merge_reports`) are not redrawn: their existing
    PNG, if any, is left untouched and linked from the Markdown."""
    markdown_path = Path(markdown_path)
    json_path = json_path or markdown_path.with_suffix(".json")
    charts_dir = charts_dir or markdown_path.parent / markdown_path.stem
    written: dict[str, Path] = {}
    pngs: dict[str, Path] = {}
    for area in report.areas():
        if area in keep_charts and chart_path(charts_dir, area).is_file():
            pngs[area] = chart_path(charts_dir, area)
    if charts:
        for area, png in write_charts(report, charts_dir, skip=keep_charts).items():
            written[f"chart:{area}"] = png
            pngs[area] = png
    chart_links = {
        area: os.path.relpath(pngs[area], markdown_path.parent) for area in report.areas() if area in pngs
    }
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(render_markdown(report, chart_links))
    written["markdown"] = markdown_path
    write_json(report, json_path)
    written["json"] = json_path
    return written


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
