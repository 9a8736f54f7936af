"""Unit tests of the benchmark harness (``bench/harness.py``): statistics, targets, rows, registry, report.

No timing assertions: the callables here return fixed figures.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `bench` lives at the repository root, next to `src`
    sys.path.insert(0, str(REPO_ROOT))

from bench.__main__ import AREA_ORDER, main, ordered_areas, parse_args  # noqa: E402
from bench.harness import (  # noqa: E402
    Row,
    Stats,
    attainment,
    compare,
    comparison_row,
    discover,
    evaluate_target,
    finalize_rows,
    format_ratio,
    format_value,
    load_warning,
    run_area,
    sample,
    single_row,
)
from bench.report import Report, render_markdown, write_report  # noqa: E402

from bench import charts, harness  # noqa: E402

# ----------------------------------------------------------------------------------------------- statistics


def test_stats_odd_count() -> None:
    stats = Stats.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stats.median == 3.0
    assert stats.spread == (1.0, 5.0)
    assert stats.iqr == (2.0, 4.0)
    assert stats.n == 5


def test_stats_even_count_and_single_sample() -> None:
    assert Stats.of([1.0, 2.0, 3.0, 10.0]).median == 2.5
    single = Stats.of([7.0])
    assert (single.median, single.min, single.max, single.q1, single.q3) == (7.0, 7.0, 7.0, 7.0, 7.0)


def test_stats_rejects_no_samples() -> None:
    with pytest.raises(ValueError):
        Stats.of([])


def _sequence(values: list[float], calls: list[str], tag: str) -> Callable[[], float]:
    it: Iterator[float] = iter(values)

    def run() -> float:
        calls.append(tag)
        return next(it)

    return run


def test_sample_discards_warmup() -> None:
    calls: list[str] = []
    stats = sample(_sequence([1000.0, 1.0, 2.0, 3.0], calls, "x"), runs=3, warmup=1)
    assert calls == ["x"] * 4
    assert stats.median == 2.0
    assert stats.max == 3.0  # the warm-up figure (1000) is not recorded


def test_compare_interleaves_abba_and_pairs_ratios() -> None:
    calls: list[str] = []
    ours = _sequence([99.0, 10.0, 20.0, 30.0, 40.0], calls, "ours")
    base = _sequence([99.0, 5.0, 10.0, 10.0, 40.0], calls, "base")
    result = compare(ours, base, runs=4, warmup=1)
    assert calls == ["ours", "base", "ours", "base", "base", "ours", "ours", "base", "base", "ours"]
    # pairs: (10, 5) (20, 10) (30, 10) (40, 40) -> ratios 2, 2, 3, 1
    assert result.ratio.samples == (2.0, 2.0, 3.0, 1.0)
    assert result.ratio.median == 2.0
    assert result.ratio.spread == (1.0, 3.0)
    assert result.ours.median == 25.0
    assert result.baseline.median == 10.0


def test_rate_returns_amount_per_second() -> None:
    run = harness.rate(lambda: None, 1.0)
    assert run() > 0


# ---------------------------------------------------------------------------------------------------- targets


@pytest.mark.parametrize(
    ("target", "value", "unit", "ratio", "expected"),
    [
        (">= 2x", 1.0, "records/s", 2.5, True),
        (">= 2.0x", 1.0, "records/s", 1.5, False),
        ("≥ 2×", 1.0, "records/s", 2.0, True),
        (">= 2 GiB/s", 3.0, "GiB/s", None, True),
        (">= 2 GiB/s", 1.5, "GiB/s", None, False),
        (">= 2 GiB/s", 3000.0, "MiB/s", None, True),
        (">= 500 MiB/s", 0.25, "GiB/s", None, False),
        (">= 1M records/s", 1.2e6, "records/s", None, True),
        (">= 1M records/s", 9e5, "records/s", None, False),
        (">= 2 GiB/s and >= 0.5x", 3.0, "GiB/s", 0.6, True),
        (">= 2 GiB/s and >= 0.5x", 3.0, "GiB/s", 0.4, False),
        ("<= 10 ms", 5.0, "ms", None, True),
        (">= 2x", 1.0, "records/s", None, None),  # no ratio to judge
        (">= 2 GiB/s", 3.0, "records/s", None, None),  # units not comparable
        ("fast enough", 3.0, "GiB/s", None, None),
        (None, 3.0, "GiB/s", 1.0, None),
    ],
)
def test_evaluate_target(
    target: str | None, value: float, unit: str, ratio: float | None, expected: bool | None
) -> None:
    assert evaluate_target(target, value=value, unit=unit, ratio=ratio) is expected


def test_attainment_is_worst_clause_fraction() -> None:
    row = Row("a", "n", 1.0, "GiB/s", ratio=1.5, target=">= 2 GiB/s and >= 1.0x")
    assert attainment(row) == pytest.approx(0.5)
    assert attainment(Row("a", "n", 1.0, "GiB/s")) is None


# ------------------------------------------------------------------------------------------------------ rows


def test_row_from_dict_fills_ratio_and_spreads_and_keeps_extras() -> None:
    row = Row.from_dict(
        {
            "area": "columnar",
            "name": "decode to Arrow",
            "value": 6.0,
            "unit": "records/s",
            "baseline_name": "kafka-python",
            "baseline_value": 2.0,
            "target": ">= 2x",
            "spread": [5.0, 7.0],
            "batch_size": 500,
        }
    )
    assert row.ratio == 3.0
    assert row.spread == (5.0, 7.0)
    assert row.passed is None  # filled by finalize_rows
    assert "batch_size: 500" in row.note
    (done,) = finalize_rows([row])
    assert done.passed is True


def test_row_from_dict_requires_core_fields() -> None:
    with pytest.raises(ValueError, match="value"):
        Row.from_dict({"area": "a", "name": "n", "unit": "x"})


def test_row_round_trips_through_dict() -> None:
    row = Row(
        "a", "n", 1.0, "GiB/s", "b", 2.0, 0.5, ">= 1x", False, (0.9, 1.1), (1.9, 2.1), (0.4, 0.6), 5, "x"
    )
    assert Row.from_dict(json.loads(json.dumps(row.to_dict()))) == row


def test_comparison_and_single_rows_evaluate_targets() -> None:
    result = compare(lambda: 4.0, lambda: 2.0, runs=3, warmup=0)
    row = comparison_row("records", "decode", "records/s", result, "kafka-python", target=">= 2x")
    assert (row.value, row.baseline_value, row.ratio, row.passed, row.runs) == (4.0, 2.0, 2.0, True, 3)
    base = single_row("baselines", "os.write", "GiB/s", Stats.of([1.0, 2.0, 3.0]))
    assert (base.value, base.spread, base.passed, base.baseline_name) == (2.0, (1.0, 3.0), None, None)


def test_formatting() -> None:
    assert format_value(275_000.0, "records/s") == "275k records/s"
    assert format_value(1_510_000.0, "ops/s") == "1.51M ops/s"
    assert format_value(3.4149, "GiB/s") == "3.41 GiB/s"
    assert format_value(None, "GiB/s") == "—"
    assert format_ratio(2.314) == "2.31x"
    assert format_ratio(0.0326) == "0.033x" and format_ratio(0.54) == "0.54x"
    assert format_ratio(None) == "—"


# -------------------------------------------------------------------------------------------------- registry


def _write_package(root: Path, name: str, modules: dict[str, str]) -> Path:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for module, source in modules.items():
        (pkg / f"{module}.py").write_text(textwrap.dedent(source))
    return pkg


def test_discover_keeps_registry_order_skips_missing_and_appends_extras(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = _write_package(
        tmp_path, "fakebench", {"bench_zeta": "", "bench_baselines": "", "bench_records": ""}
    )
    monkeypatch.setattr(
        harness,
        "REGISTRY",
        {
            "records": "fakebench.bench_records",
            "columnar": "fakebench.bench_columnar",
            "baselines": "fakebench.bench_baselines",
        },
    )
    found = discover(pkg, "fakebench")
    assert list(found) == ["records", "baselines", "zeta"]
    assert found["zeta"] == "fakebench.bench_zeta"


def test_real_registry_lists_the_record_and_baseline_modules() -> None:
    found = discover()
    assert found["records"] == "bench.bench_records"
    assert found["baselines"] == "bench.bench_baselines"
    assert list(found).index("records") < list(found).index("baselines")


def test_log_and_loader_areas_are_registered_in_report_order() -> None:
    found = ordered_areas()
    assert found["log"] == "bench.bench_log"
    assert found["loader"] == "bench.bench_loader"
    order = list(found)
    assert order[: len(harness.REGISTRY)] == list(harness.REGISTRY)
    assert order.index("baselines") < order.index("storage") < order.index("log") < order.index("loader")


def test_ordered_areas_puts_unknown_areas_last_in_discovery_order() -> None:
    found = {"zeta": "b.z", "loader": "b.l", "alpha": "b.a", "records": "b.r", "log": "b.g"}
    assert list(ordered_areas(found)) == ["records", "log", "loader", "zeta", "alpha"]
    assert set(AREA_ORDER) <= {"storage", "log", "loader"}


def test_log_and_loader_modules_expose_run() -> None:
    import importlib

    for module in ("bench.bench_log", "bench.bench_loader"):
        run = getattr(importlib.import_module(module), "run", None)
        assert callable(run), module


def test_count_file_ops_sees_opens_stats_and_access_under_the_directory(tmp_path: Path) -> None:
    import os

    from bench.bench_loader import count_file_ops

    (tmp_path / "00000000000000000000.index").write_bytes(b"")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("x")
    real = (os.open, os.stat, os.access, open)
    try:
        with count_file_ops(tmp_path) as ops:
            os.close(os.open(tmp_path / "00000000000000000000.index", os.O_RDONLY))
            with open(tmp_path / "00000000000000000000.log", "rb"):
                pass
            os.stat(tmp_path / "00000000000000000000.log")
            os.access(tmp_path / "00000000000000000000.log", os.R_OK)
            os.stat(outside)
        assert ops.opens == {".index": 1, ".log": 1}
        assert ops.index_bases == {"00000000000000000000"}
        assert (ops.stats, ops.accesses) == (1, 1)
        assert (os.open, os.stat, os.access, open) == real  # restored
    finally:
        outside.unlink()


def test_run_area_converts_dict_rows_and_captures_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_package(
        tmp_path,
        "fakebench2",
        {
            "bench_dicts": """
                def run(quick):
                    return [{"area": "columnar", "name": "n", "value": 3.0, "unit": "records/s",
                             "baseline_name": "b", "baseline_value": 1.0, "ratio": 3.0, "target": ">= 2x"}]
            """,
            "bench_broken": """
                def run(quick):
                    raise RuntimeError("boom")
            """,
            "bench_norun": "X = 1\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ok = run_area("dicts", "fakebench2.bench_dicts", quick=True)
    assert ok.error is None
    (row,) = ok.rows
    assert isinstance(row, Row) and row.passed is True and row.area == "columnar"
    broken = run_area("broken", "fakebench2.bench_broken", quick=True)
    assert broken.rows == [] and broken.error is not None and "boom" in broken.error
    norun = run_area("norun", "fakebench2.bench_norun", quick=True)
    assert norun.error is not None and "run(quick)" in norun.error
    missing = run_area("missing", "fakebench2.bench_missing", quick=True)
    assert missing.error is not None


# ---------------------------------------------------------------------------------------------------- report


def _fake_report() -> Report:
    rows = [
        Row(
            "records",
            "decode to Record objects, uncompressed",
            300_000.0,
            "records/s",
            "kafka-python",
            150_000.0,
            2.0,
            ">= 2x",
            True,
            (290_000.0, 310_000.0),
            (140_000.0, 160_000.0),
            (1.9, 2.1),
            5,
            "same bytes",
        ),
        Row(
            "records",
            "encode | pipes",
            100_000.0,
            "records/s",
            "kafka-python",
            100_000.0,
            1.0,
            ">= 2x",
            False,
            (90_000.0, 110_000.0),
            (95_000.0, 105_000.0),
            (0.9, 1.1),
            5,
        ),
        Row("baselines", "os.write 1 MiB chunks", 4.0, "GiB/s", spread=(3.5, 4.5), runs=5),
        Row("baselines", "100 B append + fsync", 5000.0, "ops/s", spread=(4000.0, 6000.0), runs=5),
    ]
    return Report(
        rows=rows,
        machine={"cpu": "Test CPU", "cores": "2", "python": "CPython 3.11", "numba": "0.60"},
        quick=True,
        started="2024-01-01 00:00 UTC",
        seconds=12.0,
        area_seconds={"records": 10.0, "baselines": 2.0, "columnar": 0.1},
        failures={"columnar": "Traceback ...\nRuntimeError: boom"},
        command="python -m bench --quick",
    )


def test_render_markdown_has_tables_machine_targets_and_failures() -> None:
    text = render_markdown(_fake_report(), {"records": "benchmarks/records.png"})
    assert text.startswith("# Benchmarks\n")
    assert "## How to read this" in text and f"median of {harness.QUICK_RUNS} runs" in text
    assert "1 of 2 targets met." in text
    assert "| Test CPU |" in text
    assert "## records" in text and "## baselines" in text
    assert "![records](benchmarks/records.png)" in text
    assert (
        "| decode to Record objects, uncompressed [1] | 300k records/s | 290k–310k | kafka-python |" in text
    )
    assert "1.90x–2.10x" in text
    assert "**short** (50% of target)" in text
    assert "encode \\| pipes" in text  # table cells escape pipes
    assert "| os.write 1 MiB chunks | 4 GiB/s | 3.5–4.5 | — | — |" in text
    assert "## Failed areas" in text and "RuntimeError: boom" in text
    assert "1. same bytes" in text


def test_write_report_writes_markdown_json_and_small_charts(tmp_path: Path) -> None:
    out = tmp_path / "docs" / "benchmarks.md"
    written = write_report(_fake_report(), out)
    assert written["markdown"] == out and out.is_file()
    data = json.loads((tmp_path / "docs" / "benchmarks.json").read_text())
    assert data["mode"] == "quick" and len(data["rows"]) == 4
    assert data["rows"][0]["spread"] == [290_000.0, 310_000.0]
    assert [Row.from_dict(r) for r in data["rows"]] == _fake_report().rows
    for area in ("records", "baselines"):
        png = tmp_path / "docs" / "benchmarks" / f"{area}.png"
        assert written[f"chart:{area}"] == png
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size < 100_000
    assert "![records](benchmarks/records.png)" in out.read_text()


def test_write_report_without_charts(tmp_path: Path) -> None:
    out = tmp_path / "b.md"
    written = write_report(_fake_report(), out, charts=False)
    assert set(written) == {"markdown", "json"}
    assert not (tmp_path / "b").exists()


def test_cli_arguments() -> None:
    args = parse_args(["--quick", "--only", "records", "baselines", "--out", "x.md"])
    assert args.quick and args.only == ["records", "baselines"] and args.out == Path("x.md")
    default = parse_args([])
    assert not default.quick and default.only is None and default.out.name == "benchmarks.md"


def test_report_round_trips_through_json_and_cli_re_renders(tmp_path: Path) -> None:
    report = _fake_report()
    source = tmp_path / "run.json"
    source.write_text(json.dumps(report.to_dict()))
    again = Report.from_dict(json.loads(source.read_text()))
    assert again == report
    out = tmp_path / "out" / "benchmarks.md"
    assert main(["--render", str(source), "--out", str(out), "--no-charts"]) == 0
    assert out.read_text() == render_markdown(report)
    assert json.loads(out.with_suffix(".json").read_text()) == report.to_dict()


def test_load_warning_only_when_the_machine_was_busy() -> None:
    quiet = {
        "cores": "2",
        "load average at start": "0.40 / 0.30 / 0.20",
        "load average at end": "0.90 / 0.5 / 0.2",
    }
    busy = {**quiet, "load average at end": "3.50 / 2.00 / 1.00"}
    assert load_warning(quiet) is None
    assert load_warning({}) is None
    warning = load_warning(busy)
    assert warning is not None and "3.5 on 2 cores" in warning
    report = _fake_report()
    report.machine.update(busy)
    assert "> **Note:** the 1-minute load average reached 3.5" in render_markdown(report)


# ------------------------------------------------------------------------------------------ line charts (#10)


def _line_report() -> Report:
    """A report with a line-chart area of ratios (growth), one of values (memory) and the bar-chart areas."""
    rows = list(_fake_report().rows)
    for series, ratios in (("append", (0.5, 0.45, 0.4)), ("open", (0.02, 0.1, 0.3))):
        for x, ratio in zip((1 << 20, 1 << 30, 10 << 30), ratios):
            row = Row(
                "growth",
                f"{series} at {x}",
                ratio * 2,
                "GiB/s",
                "raw",
                2.0,
                ratio,
                ratio_spread=(ratio * 0.9, ratio * 1.1),
                runs=3,
            )
            row.series, row.x, row.x_unit = series, float(x), "bytes"
            rows.append(row)
    rows.append(Row("growth", "append stays flat", 0.4, "x", "ratio at 1 MiB", 0.5, 0.8, ">= 0.8x", True))
    for x, peak in ((1 << 30, 190.0), (10 << 30, 200.0)):
        row = Row("memory", f"append {x}", peak, "MiB", "raw", 180.0, spread=(peak - 1, peak + 1), runs=3)
        row.series, row.x, row.x_unit = "append", float(x), "bytes"
        rows.append(row)
    return Report(
        rows=rows,
        machine={"cpu": "Test CPU", "cores": "2"},
        quick=True,
        started="2024-01-01 00:00 UTC",
        seconds=1.0,
    )


def test_row_chart_fields_round_trip_and_default_to_none() -> None:
    row = Row("growth", "append", 1.0, "GiB/s", "raw", 2.0, 0.5, series="append", x=1024.0, x_unit="bytes")
    data = json.loads(json.dumps(row.to_dict()))
    assert (data["series"], data["x"], data["x_unit"]) == ("append", 1024.0, "bytes")
    assert Row.from_dict(data) == row
    old = Row.from_dict({"area": "a", "name": "n", "value": 1.0, "unit": "GiB/s"})  # an older JSON report
    assert (old.series, old.x, old.x_unit, old.note) == (None, None, None, "")
    base = {"area": "m", "name": "peak RSS", "value": 3.0, "unit": "MiB", "baseline_value": 2.0}
    assert Row.from_dict(base).ratio == 1.5  # a module's dict without a ratio: computed
    assert Row.from_dict({**base, "ratio": None}).ratio is None  # to_dict's explicit null: kept


def test_format_x_and_line_rows() -> None:
    assert charts.format_x(1 << 20, "bytes") == "1 MiB"
    assert charts.format_x(10 << 30, "bytes") == "10 GiB"
    assert charts.format_x(512, "bytes") == "512 B"
    assert charts.format_x(10_000, "segments") == "10,000"
    assert charts.format_x(0.5, None) == "0.5"
    rows = _line_report().rows
    lined = charts.line_rows(rows)
    assert {row.area for row in lined} == {"growth", "memory"}
    assert all(row.x is not None for row in lined) and len(lined) == 8


def test_write_report_draws_line_charts_and_keeps_bar_charts(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    written = write_report(_line_report(), out)
    for area in ("records", "baselines", "growth", "memory"):
        png = written[f"chart:{area}"]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size < 100_000
    text = out.read_text()
    assert "![growth](benchmarks/growth.png)" in text and "| append stays flat |" in text
    again = Report.from_dict(json.loads(out.with_suffix(".json").read_text()))
    assert again.rows == _line_report().rows


# ----------------------------------------------------------------------------- growth and memory areas (#10)


def test_growth_segment_counts_fit_the_descriptor_limit() -> None:
    from bench.bench_growth import _fit_segments

    counts, note = _fit_segments((1, 10, 100, 1_000, 10_000), 20_000)
    assert counts == [1, 10, 100, 1_000, 2_500] and "10,000 segments not measured" in note
    assert _fit_segments((1, 10, 100, 1_000, 10_000), 30_000)[0] == [1, 10, 100, 1_000, 5_000]
    assert _fit_segments((1, 10, 100, 1_000, 10_000), 1 << 20) == ([1, 10, 100, 1_000, 10_000], "")


def test_growth_rows_on_tiny_sizes(tmp_path: Path) -> None:
    from bench import bench_growth

    rows = bench_growth.build_rows(
        tmp_path,
        sizes=(64 << 10, 256 << 10),
        segment_counts=(1, 2),
        segment_batches=4,
        runs=1,
        lookups=20,
        pool_bytes=256 << 10,
        budget_s=0.0,
    )
    points = charts.line_rows(rows)
    assert len(points) == 16  # 4 metrics x (2 sizes + 2 segment counts)
    assert {row.series for row in points} == set(bench_growth.METRICS)
    assert {row.x_unit for row in points} == {"bytes", "segments"}
    assert all(row.ratio is not None and row.ratio > 0 and row.target is None for row in points)
    flat = [row for row in rows if row.x is None]
    assert len(flat) == 8
    for row in flat:
        assert row.ratio is not None
        assert row.value == pytest.approx(row.ratio * (row.baseline_value or 0.0))
        if row.name.startswith("open stays flat"):  # a lazy open against a growing listing: no target
            assert (row.target, row.passed) == (None, None) and "no target" in row.note
        else:
            assert row.target == ">= 0.8x" and row.passed is (row.ratio >= 0.8)
    assert not list(tmp_path.iterdir())  # every scratch directory removed


def test_memory_workloads_run_in_process(tmp_path: Path) -> None:
    from bench.bench_log import batch_of
    from bench.bench_memory import WORKERS, run_workload

    template = batch_of(16 << 10)
    assert run_workload("append", tmp_path, 8, template) == 8 * len(template)
    assert run_workload("raw-append", tmp_path, 8, template) == 8 * len(template)
    for kind in WORKERS[2:]:
        assert run_workload(kind, tmp_path, 8, template) == 8 * len(template), kind


def test_memory_rows_and_flatness_from_peaks() -> None:
    from bench.bench_memory import WORKERS, Peak, SizeResult, build_rows

    def result(size: int, ours: float) -> SizeResult:
        peaks = {w: [Peak(w, 170.0, 180.0, 1.0, size)] * 3 for w in WORKERS}
        peaks["append"] = [Peak("append", 170.0, ours, 1.0, size)] * 3
        return SizeResult(size, size, peaks)

    rows = build_rows([result(1 << 30, 200.0), result(10 << 30, 300.0)])
    flat = {row.name.split(" stays flat")[0]: row for row in rows if row.x is None}
    assert set(flat) == {"append", "Log.read scan", "ReadOnlyLog scan", "columnar decode"}
    assert flat["append"].value == 100.0 and flat["append"].passed is False
    assert flat["Log.read scan"].value == 0.0 and flat["Log.read scan"].passed is True
    points = charts.line_rows(rows)
    assert len(points) == 8 and all(row.unit == "MiB" and row.ratio is None for row in points)
    assert "+30 MiB" in points[0].note  # 200 MiB peak over 170 MiB of interpreter + imports


def test_memory_worker_subprocess_reports_peak_rss(tmp_path: Path) -> None:
    from bench.bench_log import batch_of
    from bench.bench_memory import measure

    template = tmp_path / "template.bin"
    template.write_bytes(batch_of(16 << 10))
    peak = measure("raw-append", tmp_path, 4, template)
    assert peak.worker == "raw-append" and peak.nbytes == 4 * template.stat().st_size
    assert 0 < peak.imports <= peak.peak


def test_load_kafka_java_is_the_interop_harness_loaded_once() -> None:
    from bench.harness import load_kafka_java

    first = load_kafka_java()
    assert first is not None and hasattr(first, "KafkaJava")
    assert load_kafka_java() is first
