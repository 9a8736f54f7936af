"""The benchmark report: the :class:`Report` / :class:`Rerun` model, merging, Markdown and JSON.

This module owns what one ``python -m bench`` invocation produced and how it is written out:

* :class:`Report` (the rows, the machine, the timings and failures of a run) and :class:`Rerun` (a later run
  of some areas merged into it), with their JSON form (:meth:`Report.to_dict` / :meth:`Report.from_dict`);
* :func:`merge_reports`, which replaces some areas of an earlier report with a fresh run of just those areas
  (``python -m bench --only ... --merge``); the merged :class:`Report` records each such re-run as a
  :class:`Rerun` (when, which areas, which machine and load), and the Markdown header says which areas come
  from which run;
* :func:`render_markdown` (``docs/benchmarks.md``) and its table and text helpers, :func:`write_json`
  (``docs/benchmarks.json``) and :func:`write_report`, which writes both plus the charts of
  :mod:`bench.charts`;
* :func:`targets_lines`, the targets table printed both in ``docs/benchmarks.md`` and, through
  :func:`readme_block` / :func:`update_readme`, in the README's generated benchmark section, so the two
  come from one results file and cannot disagree.

The rows, their targets and the formatting of figures (:func:`~bench.harness.format_value`,
:func:`~bench.harness.format_ratio`) belong to :mod:`bench.harness`, which also re-exports this module's
public names.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.charts import chart_path, write_charts
from bench.harness import (
    FULL_RUNS,
    QUICK_RUNS,
    Row,
    attainment,
    format_ratio,
    format_value,
    load_warning,
)

__all__ = [
    "README_BEGIN",
    "README_END",
    "Report",
    "Rerun",
    "merge_reports",
    "readme_block",
    "render_markdown",
    "targets_lines",
    "update_readme",
    "write_json",
    "write_report",
]


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


#: Measurements made while designing (not re-run by ``make bench``): the numbers module docstrings used to
#: carry. Rendered as the report's "Design measurements" section.
DESIGN_MEASUREMENTS = """Measured while designing, on the same 2-vCPU VM; the numbers that used to sit in module docstrings (each
module points here). They are not re-measured by `make bench`: rerun the named benchmark to check one.

| Where | What was measured | Result |
|---|---|---|
| `kafkalog.records._kernels` | leader validation of an append (`_record_stats`): the fast path for records whose varints are at most 3 bytes, against the strict parser alone (`bench/bench_log.py`'s `batch_of`) | about 67 µs instead of 100 µs for a 1 MiB batch of 100-byte values; 1.35 µs instead of 1.85 µs for 16 KiB. Decoding its varints branch-free was twice as slow |
| `kafkalog.records.columnar` | the decode's output `BufferPool` (`bench/bench_columnar.py`) | a first-touch page fault costs about 4 µs per 4 KiB page, about 100x writing into a page already mapped; the pooled decode is about 2x faster than fresh output memory on every call when a consumer drops batches one at a time |
| `kafkalog.storage._reindex` | the bulk recovery walk of a segment | about 0.6-0.7x the speed of a raw read + CRC-32C of the same bytes (0.25x batch by batch) |
| `kafkalog.server.broker` | `offload`: blocking work on the I/O threads or inline on the event loop | the thread hop costs about 0.1-0.5 ms; one connection's pipelined 1 MiB produce requests ran about 25% faster inline, three connections' together about 20% faster through the pool |
| `kafkalog.server.connection` | growing a direct frame's buffer | a `bytes(n)` temporary per step cost about 10x more in page faults than growing in place from a shared block of zeros |"""


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


# --------------------------------------------------------------------------------------------------- markdown


def _format_number(value: float, unit: str) -> str:
    """Like :func:`format_value` but without the unit (for spreads)."""
    text = format_value(value, unit)
    return text[: -len(unit) - 1] if text.endswith(" " + unit) else text


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
            f"{what} on {run.started} by `{run.command}` in {_seconds(run.seconds)} s ({_load_text(run.machine)})"
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


#: A ratio whose per-round range spans more than this factor (max ÷ min) is flagged "wide" in the targets table.
WIDE_RATIO_SPREAD = 2.0


def _ratio_spread_text(row: Row) -> str:
    text = _spread_text(row.ratio_spread, None)
    lo, hi = row.ratio_spread or (0.0, 0.0)
    if lo > 0 and hi / lo > WIDE_RATIO_SPREAD:
        text += " (**wide**)"
    return text


def targets_lines(report: Report) -> list[str]:
    """The targets summary: "N of M targets met." and a table of **every** row with a target, met or short,
    with its baseline and the per-round range of its ratio. ``docs/benchmarks.md`` and the README's benchmark
    section both print exactly these lines (:func:`readme_block`), so they cannot disagree."""
    targeted = [row for row in report.rows if row.target]
    met = sum(1 for row in targeted if row.passed)
    lines = [
        f"{met} of {len(targeted)} targets met.",
        "",
        "| Area | Benchmark | Ours | Baseline | Ratio | Ratio range over the runs | Target | Result |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for row in targeted:
        lines.append(
            f"| {_cell(row.area)} | {_cell(row.name)} | {format_value(row.value, row.unit)} | "
            f"{_cell(row.baseline_name or '—')} | {format_ratio(row.ratio)} | {_ratio_spread_text(row)} | "
            f"{_cell(row.target or '')} | {_result_text(row)} |"
        )
    return lines


#: The README's generated benchmark section lies between these two lines (``python -m bench`` rewrites it).
README_BEGIN = (
    "<!-- benchmark targets: generated from docs/benchmarks.json by `python -m bench`; do not edit -->"
)
README_END = "<!-- end of the generated benchmark targets -->"


def readme_block(report: Report) -> str:
    """The README's benchmark section, from the same report (and the same :func:`targets_lines`) as
    ``docs/benchmarks.md``, between :data:`README_BEGIN` and :data:`README_END`."""
    when = f"{'quick' if report.quick else 'full'} run of {report.started} (`{report.command}`)"
    if report.reruns:
        when += "; " + "; ".join(f"{_area_list(run.areas)} re-run on {run.started}" for run in report.reruns)
    lines = [
        README_BEGIN,
        f"From the {when}, as in [docs/benchmarks.md](docs/benchmarks.md#targets): every benchmark with a "
        "target, met or short.",
        "",
        *targets_lines(report),
        README_END,
    ]
    return "\n".join(lines)


def update_readme(report: Report, path: Path) -> None:
    """Replace the generated benchmark section of the README at ``path`` with :func:`readme_block`.

    Raises :class:`ValueError` when the README has no such section (both marker lines, in order)."""
    text = path.read_text()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no generated benchmark section ({README_BEGIN!r} ... {README_END!r})")
    path.write_text(text[:start] + readme_block(report) + text[end + len(README_END) :])


def _seconds(value: float) -> str:
    """Whole seconds as the report shows them, from the value rounded as the JSON stores it (0.1 s): the
    Markdown written by a run and the one rendered from its JSON then agree (313.46 s is 313.5 in the JSON,
    so "314" in both, never "313" in one)."""
    return f"{round(value, 1):.0f}"


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
        f"{report.started}, in {_seconds(report.seconds)} s. Do not edit by hand: run `make bench` "
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
    if any(row.target for row in report.rows):
        lines += ["## Targets", "", *targets_lines(report), ""]
    if report.failures:
        lines += ["## Failed areas", ""]
        for area, error in report.failures.items():
            lines += [f"**{area}** raised:", "", "```text", error, "```", ""]
    lines += ["## Design measurements", "", DESIGN_MEASUREMENTS, ""]
    lines += ["## Machine", "", *_machine_lines(report), ""]
    for area in report.areas():
        rows = [row for row in report.rows if row.area == area]
        if not rows:
            continue
        seconds = report.area_seconds.get(area)
        lines += [f"## {area}", ""]
        if seconds is not None:
            lines += [f"Measured in {_seconds(seconds)} s.", ""]
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
