"""Spark's Python workers must be able to import kafkalog: :func:`kafkalog.spark.check_workers` names the
interpreter they use and ``PYSPARK_PYTHON`` when they cannot (issue 23 item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafkalog.spark import WorkerPythonError, check_workers, worker_python

pytest.importorskip("pyspark")


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


def _fake_spark(python_exec: str, conf: dict[str, str] | None = None, master: str = "local[2]") -> Any:
    context = SimpleNamespace(pythonExec=python_exec, master=master, getConf=lambda: _Conf(conf or {}))
    return SimpleNamespace(sparkContext=context)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python without kafkalog (a fresh virtual environment)."""
    root = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    found = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('kafkalog') is None)"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
        check=True,
    )
    if found.stdout.strip() != "True":
        pytest.skip("the base interpreter has kafkalog installed")
    return python


def test_worker_python_precedence() -> None:
    assert worker_python(_fake_spark("/a/python")) == "/a/python"
    assert worker_python(_fake_spark("/a/python", {"spark.pyspark.python": "/b/python"})) == "/b/python"


def test_spark_connect_sessions_are_not_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Connect:
        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")

    monkeypatch.setenv("PYSPARK_PYTHON", "/x/python")
    assert check_workers(Connect()) == "/x/python"


def test_workers_without_kafkalog_are_named(bare_python: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with pytest.raises(WorkerPythonError) as failure:
        check_workers(_fake_spark(str(bare_python)))
    message = str(failure.value)
    for part in (str(bare_python), "PYSPARK_PYTHON", "spark.pyspark.python", sys.executable, "kafkalog"):
        assert part in message


def test_worker_python_not_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkerPythonError, match=r"run python3, which is not found on PATH.*PYSPARK_PYTHON"):
        check_workers(_fake_spark("python3"))


@pytest.mark.spark
def test_check_workers_of_the_test_session(spark: Any) -> None:
    assert check_workers(spark) == worker_python(spark) == os.environ["PYSPARK_PYTHON"]


_JOB = """
import kafkalog.spark
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    kafkalog.spark.register(spark)
except kafkalog.spark.WorkerPythonError as exc:
    print("WorkerPythonError:", exc)
finally:
    spark.stop()
"""


@pytest.mark.slow
@pytest.mark.spark
def test_job_run_outside_its_venv(bare_python: Path, tmp_path: Path) -> None:
    """``venv/bin/python job.py`` with another ``python3`` first on PATH and no PYSPARK_PYTHON."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(bare_python)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(
        [sys.executable, "-c", _JOB], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert "WorkerPythonError:" in done.stdout, done.stderr[-2000:]
    assert "PYSPARK_PYTHON" in done.stdout and f"run python3 ({bin_dir / 'python3'})" in done.stdout
