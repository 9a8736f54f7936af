"""The README's benchmark table and ``docs/benchmarks.md`` are both generated from ``docs/benchmarks.json``.

A hand edit of either, or a results file changed without regenerating them (``python -m bench --render
docs/benchmarks.json --no-charts``), fails here: the two cannot drift apart or choose their rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.charts import chart_path
from bench.report import README_BEGIN, README_END, Report, readme_block, render_markdown

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _report() -> Report:
    return Report.from_dict(json.loads((DOCS / "benchmarks.json").read_text()))


def test_readme_benchmark_table_is_generated_from_the_results_file() -> None:
    readme = (REPO / "README.md").read_text()
    assert readme.count(README_BEGIN) == 1 and readme.count(README_END) == 1
    block = readme[readme.index(README_BEGIN) : readme.index(README_END) + len(README_END)]
    report = _report()
    assert block == readme_block(report)
    # every row with a target is there, met or short
    targeted = [row for row in report.rows if row.target]
    assert sum(1 for line in block.splitlines() if line.startswith("| ") and "| Area |" not in line) == len(
        targeted
    )
    assert sum(1 for row in targeted if not row.passed) == block.count("**short**") > 0


def test_docs_benchmarks_md_is_generated_from_the_results_file() -> None:
    report = _report()
    charts = {
        area: os.path.relpath(chart_path(DOCS / "benchmarks", area), DOCS)
        for area in report.areas()
        if chart_path(DOCS / "benchmarks", area).is_file()
    }
    assert (DOCS / "benchmarks.md").read_text() == render_markdown(report, charts)
