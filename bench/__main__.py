"""``python -m bench [--quick] [--only AREA ... [--merge]] [--out docs/benchmarks.md]``: run the benchmarks,
write the report.

Writes the Markdown report (``--out``), its JSON twin (same path, ``.json``) and one PNG chart per area
(``<out dir>/<out stem>/<area>.png``), and, when ``--out`` is the default ``docs/benchmarks.md``, the README's
generated benchmark section (the same targets table), then prints the target summary. Exits 1 if an area raised (the
report is still written, with the traceback), 2 on bad arguments.

With ``--only A B`` the report holds only areas A and B. Add ``--merge`` to refresh those areas in an
existing report instead: the areas are run, then the JSON twin of ``--out`` (or ``--json``) is loaded,
A's and B's rows, timings and failures are replaced, every other area's rows, notes and chart are kept
as they were, and the Markdown, the JSON and A's and B's charts are rewritten from the merged data (the
target summary included). The header then says which areas were re-run when, and under what load, and
which come from the original run; the Machine table has a column per run. ``--merge`` exits 2, before
running anything, without ``--only``, when the JSON is missing or unreadable, or when it is from the
other mode (quick vs full).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.harness import (
    REGISTRY,
    attainment,
    discover,
    format_ratio,
    format_value,
    load_average,
    log,
    machine_info,
    now_text,
    run_area,
)
from bench.report import Report, merge_reports, update_readme, write_report

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
#: The README whose generated benchmark section follows the default report (``--out`` left as it is).
README = Path(__file__).resolve().parent.parent / "README.md"


def _publish_readme(report: Report, out: Path) -> None:
    """Rewrite the README's benchmark section from ``report`` when ``out`` is the project's report."""
    if out.resolve() == DEFAULT_OUT:
        update_readme(report, README)
        log(f"wrote the benchmark section of {README}")


#: Report order of the areas after the harness registry's own: the storage layer, then the ``Log`` built on it
#: (issue #4), then loading and recovery (issue #5). Other discovered ``bench_*.py`` areas follow, by name.
AREA_ORDER = ("storage", "log", "loader")


def ordered_areas(found: dict[str, str] | None = None) -> dict[str, str]:
    """The discovered areas (:func:`bench.harness.discover`) in report order: the registry's, then
    :data:`AREA_ORDER`, then the rest as discovered."""
    found = discover() if found is None else found
    rank = {area: i for i, area in enumerate([*REGISTRY, *AREA_ORDER])}
    return dict(sorted(found.items(), key=lambda item: rank.get(item[0], len(rank))))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description="Run kafkalog's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="smaller inputs and fewer runs (a few minutes)")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="AREA",
        default=None,
        help="run only these areas (see --list); the report then holds only them, so use --out elsewhere "
        "to keep the full report",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="Markdown report path (default: docs/benchmarks.md)"
    )
    parser.add_argument("--json", type=Path, default=None, help="JSON path (default: --out with .json)")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --only: replace just those areas in the existing report (the JSON twin of --out) and "
        "keep the others as they were",
    )
    parser.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    parser.add_argument("--list", action="store_true", help="list the benchmark areas and exit")
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="JSON",
        help="measure nothing: re-render the report and charts from a previous run's JSON",
    )
    return parser.parse_args(argv)


def load_base_report(path: Path, quick: bool) -> Report:
    """The report ``--merge`` merges into: the JSON at ``path``, checked to be of the same mode.

    Raises :class:`ValueError` with a message for the user when it is missing, unreadable or of the other
    mode (quick vs full).
    """
    mode = "quick" if quick else "full"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"--merge: no report to merge into at {path}; run without --merge first (or point --out/--json "
            "at an existing report)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"--merge: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--merge: {path} is not a benchmark report")
    recorded = data.get("mode")
    if recorded is not None and recorded != mode:
        raise ValueError(
            f"--merge: {path} is from a {recorded} run but this is a {mode} run; merging would mix figures "
            f"of both modes (use {'--quick' if recorded == 'quick' else 'no --quick'}, or another --out)"
        )
    try:
        return Report.from_dict(data)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"--merge: {path} is not a benchmark report: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    areas = ordered_areas()
    all_areas = list(areas)
    if args.merge and (args.render is not None or args.list):
        print("--merge cannot be combined with --render or --list", file=sys.stderr)
        return 2
    if args.merge and not args.only:
        print(
            "--merge needs --only AREA ...: it replaces just those areas in the existing report",
            file=sys.stderr,
        )
        return 2
    if args.list:
        for area, module in areas.items():
            print(f"{area:12} {module}")
        return 0
    if args.render is not None:
        report = Report.from_dict(json.loads(args.render.read_text()))
        # --no-charts keeps (and links) the charts already there rather than dropping them from the report
        keep = report.areas() if args.no_charts else ()
        written = write_report(report, args.out, args.json, charts=not args.no_charts, keep_charts=keep)
        for kind, path in written.items():
            log(f"wrote {kind}: {path}")
        _publish_readme(report, args.out)
        return 0
    if args.only:
        unknown = [a for a in args.only if a not in areas]
        if unknown:
            print(f"unknown area(s): {', '.join(unknown)}; known: {', '.join(areas)}", file=sys.stderr)
            return 2
        areas = {a: m for a, m in areas.items() if a in args.only}
    previous: Report | None = None
    if args.merge:
        try:
            previous = load_base_report(args.json or args.out.with_suffix(".json"), args.quick)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2

    command = "python -m bench" + (" --quick" if args.quick else "")
    if args.only:
        command += " --only " + " ".join(args.only)
    if args.merge:
        command += " --merge"
    started = now_text()
    t0 = time.perf_counter()
    machine = machine_info()
    rows = []
    area_seconds: dict[str, float] = {}
    failures: dict[str, str] = {}
    for area, module in areas.items():
        log(f"== {area} ({module}) ==")
        result = run_area(area, module, args.quick)
        area_seconds[area] = result.seconds
        rows.extend(result.rows)
        if result.error is not None:
            failures[area] = result.error
            log(f"{area} FAILED after {result.seconds:.0f} s:\n{result.error}")
        else:
            log(f"{area} done in {result.seconds:.0f} s ({len(result.rows)} rows)")

    machine["load average at end"] = load_average()
    report = Report(
        rows=rows,
        machine=machine,
        quick=args.quick,
        started=started,
        seconds=time.perf_counter() - t0,
        area_seconds=area_seconds,
        failures=failures,
        command=command,
    )
    keep_charts: list[str] = []
    if previous is not None:
        report = merge_reports(previous, report, areas, order=all_areas)
        keep_charts = [area for area in report.areas() if area not in report.reruns[-1].areas]
        log(f"merged into the report of {report.started}: kept {', '.join(keep_charts) or 'no area'}")
    written = write_report(report, args.out, args.json, charts=not args.no_charts, keep_charts=keep_charts)
    for kind, path in written.items():
        log(f"wrote {kind}: {path}")
    _publish_readme(report, args.out)

    print(f"\n{command}: {time.perf_counter() - t0:.0f} s" + (" (merged report below)" if previous else ""))
    for row in report.rows:
        verdict = "" if row.passed is None else "  PASS" if row.passed else "  SHORT"
        frac = attainment(row)
        if row.passed is False and frac is not None:
            verdict += f" ({frac:.0%} of target)"
        base = f"  vs {format_value(row.baseline_value, row.unit)}" if row.baseline_name else ""
        ratio = f"  = {format_ratio(row.ratio)}" if row.ratio is not None else ""
        target = f"  [{row.target}]" if row.target else ""
        print(
            f"{row.area:10} {row.name[:60]:60} {format_value(row.value, row.unit):>18}{base}{ratio}{target}{verdict}"
        )
    for area in report.failures:
        print(f"{area}: FAILED (see the report)" + ("" if area in failures else " in an earlier run"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
