"""The report's PNG charts: one per area, drawn with matplotlib (Agg) and saved as small palette PNGs.

This module owns :func:`write_charts` (and :func:`chart_path`, where an area's PNG goes), the three kinds of
chart and their helpers (:func:`line_rows`, :func:`format_x`, :func:`_save_png`).

By default an area's chart is a bar chart: ours ÷ baseline per row (with the min–max spread), or the values
themselves for an area of baselines. An area whose rows carry a position on an x axis
(:attr:`~bench.harness.Row.series`, :attr:`~bench.harness.Row.x` and :attr:`~bench.harness.Row.x_unit`,
e.g. "append" at 1 GiB of "bytes") gets a *line* chart instead: one panel per x unit, one line per series
over a log-scale x axis, showing the ratio (or, for rows without a ratio, ours solid and the baseline
dashed), so that growth with size reads as a slope. Rows of such an area without an x (summary rows) are
left out of the chart.

matplotlib and Pillow are imported only when a chart is drawn. :mod:`bench.harness` re-exports this
module's public names.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import Row, format_ratio, format_value, ratio_threshold

if TYPE_CHECKING:  # bench.report imports this module to draw the charts it links
    from bench.report import Report

__all__ = ["chart_path", "format_x", "line_rows", "write_charts"]


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
    thresholds = [t for t in (ratio_threshold(row.target) for row in rows) if t]
    xmax = max([*(r + h for r, h in zip(ratios, hi)), *thresholds, 1.0])
    xmin = min([*(r - lo_ for r, lo_ in zip(ratios, lo)), *thresholds, 1.0])
    log_scale = xmax / max(xmin, 1e-6) > 20
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.3))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, ratios, xerr=[lo, hi], color=colors, capsize=3, height=0.6)
    for yi, row, r, h in zip(y, rows, ratios, hi):
        threshold = ratio_threshold(row.target)
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
