"""The main job (``make demo``) end to end with a small number of events, in a subprocess as ``make`` runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]


def _skip_reason() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'kafkalog[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime on PATH (Spark needs Java 17 or 21)"
    return None


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "kafkalog.demo", "--master", "local[1]", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )


def test_demo_runs_and_checks_its_results(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    data = tmp_path / "demo"
    proc = run_demo("--events", "5000", "--users", "300", "--partitions", "2", "--data-dir", str(data))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    for text in ("kafkalog demo: timings", "produce", "batch", "stream", "all checks passed"):
        assert text in out, out[-4000:]
    assert (data / "events-0" / "00000000000000000000.log").is_file()
    assert (data / "user-stats-1").is_dir() and (data / "purchases-0").is_dir()
    assert not list((data / ".kafkalog-spark" / "staging").rglob("*.batches"))

    # a directory the demo did not make is refused, untouched
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    proc = run_demo("--events", "10", "--data-dir", str(foreign))
    assert proc.returncode != 0 and "not made by the demo" in proc.stderr
    assert (foreign / "precious.txt").read_text() == "keep me"
