"""Which Python interpreter Spark runs the ``kafkalog`` data source in, and whether it can import kafkalog.

PySpark does not run a data source in the interpreter of the job: it starts Python workers (on the driver
host to look data sources up and plan reads and writes, on every executor to run them) with the
``spark.pyspark.python`` setting, else the ``PYSPARK_PYTHON`` environment variable as it was when the
session started, else the first ``python3`` on ``PATH``. A job run as ``venv/bin/python job.py`` without
the virtual environment activated (Jupyter kernels, cron, IDE run configurations) therefore gets workers
without kafkalog: ``format("kafkalog")`` fails with ``DATA_SOURCE_NOT_FOUND`` and a data source registered
by hand with ``No module named 'kafkalog'`` on the worker, neither of which names the cause.

:func:`check_workers` names it: it finds the interpreter the workers use and checks that it can import
``pyspark_kafkalog`` (the auto-registration module) and the reader with its dependencies, by running that
interpreter with Spark's own ``PYTHONPATH`` additions (local masters) or one Spark task (clusters: the executors' own interpreter), and raises
:class:`WorkerPythonError` naming ``PYSPARK_PYTHON`` / ``spark.pyspark.python``, the interpreter, and the
one that would work (this process's). :func:`register` checks, then registers the data source.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from kafkalog.errors import KafkaError

__all__ = ["WorkerPythonError", "check_workers", "register", "worker_python"]

_DEFAULT: Final = "python3"
_PROBE: Final = (
    "import sys\n"
    "print(sys.executable)\n"
    "try:\n"
    "    import pyspark_kafkalog, kafkalog.spark.reader\n"
    "except Exception as exc:\n"
    "    print(type(exc).__name__ + ': ' + str(exc))\n"
    "else:\n"
    "    print('')\n"
)


class WorkerPythonError(KafkaError, RuntimeError):
    """The Python workers Spark starts cannot import kafkalog (see the module doc for the fix)."""


def worker_python(spark: Any) -> str:
    """The interpreter Spark starts Python workers with: ``spark.pyspark.python``, else ``PYSPARK_PYTHON``
    as the session saw it, else ``python3`` (as given: a name is looked up on ``PATH``)."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext on the client
        context = None
    configured = None
    if context is not None:
        try:
            configured = context.getConf().get("spark.pyspark.python")
        except Exception:
            configured = None
    if configured:
        return str(configured)
    exec_ = getattr(context, "pythonExec", None)
    return str(exec_ or os.environ.get("PYSPARK_PYTHON") or _DEFAULT)


def _message(python: str, resolved: str | None, detail: str) -> str:
    where = python if resolved in (None, python) else f"{python} ({resolved})"
    return (
        f"Spark's Python workers run {where}, which {detail}: format('kafkalog') fails there with "
        "DATA_SOURCE_NOT_FOUND or \"No module named 'kafkalog'\". Spark starts its workers with the "
        "spark.pyspark.python setting, else the PYSPARK_PYTHON environment variable, else the first python3 on "
        f"PATH, not with the interpreter running this job ({sys.executable}). Set PYSPARK_PYTHON={sys.executable} "
        "(or spark.pyspark.python) before the SparkSession starts, or install kafkalog[spark] into that "
        "interpreter (on a cluster: on every executor)."
    )


def _spark_python_path() -> list[str]:
    """The ``pyspark.zip`` and ``py4j`` archives Spark puts on its workers' ``PYTHONPATH``."""
    import pyspark

    return sorted(str(p) for p in (Path(pyspark.__file__).parent / "python" / "lib").glob("*.zip"))


def _probe_locally(python: str) -> None:
    resolved = shutil.which(python)
    if resolved is None:
        raise WorkerPythonError(_message(python, None, "is not found on PATH"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*_spark_python_path(), *filter(None, [env.get("PYTHONPATH")])])
    try:
        done = subprocess.run(
            [resolved, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkerPythonError(_message(python, resolved, f"cannot be run ({exc})")) from None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) < 2:
        raise WorkerPythonError(_message(python, resolved, f"failed to start: {done.stderr.strip()[-300:]}"))
    if lines[1]:
        raise WorkerPythonError(_message(python, lines[0], f"cannot import kafkalog ({lines[1]})"))


def _probe_on_executors(spark: Any, python: str) -> None:
    probe = _PROBE

    def run(_: Any) -> tuple[str, str]:
        scope: dict[str, Any] = {}
        out: list[str] = []
        scope["print"] = lambda *a: out.append(" ".join(map(str, a)))
        exec(probe, scope)  # a fixed probe, shipped by value: the executor may lack kafkalog
        return out[0], out[1]

    try:
        executable, missing = spark.sparkContext.parallelize([0], 1).map(run).collect()[0]
    except Exception as exc:
        raise WorkerPythonError(_message(python, None, f"failed to run a probe task ({exc})")) from None
    if missing:
        raise WorkerPythonError(_message(python, executable, f"cannot import kafkalog ({missing})"))


def check_workers(spark: Any) -> str:
    """Check that Spark's Python workers can import kafkalog; returns their interpreter.

    Local masters run the interpreter directly (about 0.1 s); other masters run one Spark task on an
    executor. Raises :class:`WorkerPythonError` naming ``PYSPARK_PYTHON`` / ``spark.pyspark.python`` and the
    interpreter when they cannot. Spark Connect sessions (no SparkContext here) are not checked.
    """
    python = worker_python(spark)
    try:
        master = str(spark.sparkContext.master)
    except Exception:  # Spark Connect: the server's workers are not visible from the client
        return python
    if master.startswith("local") and not master.startswith("local-cluster"):
        _probe_locally(python)
    else:
        _probe_on_executors(spark, python)
    return python


def register(spark: Any) -> None:
    """:func:`check_workers`, then ``spark.dataSource.register(KafkaLogDataSource)``."""
    from kafkalog.spark.source import KafkaLogDataSource

    check_workers(spark)
    spark.dataSource.register(KafkaLogDataSource)
