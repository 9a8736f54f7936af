"""Shared pytest configuration: hypothesis profiles (``ci`` runs more examples), the Kafka interop fixture, and
``KAFKALOG_REQUIRE_ALL``.

With ``KAFKALOG_REQUIRE_ALL=1`` (``.ci/run`` sets it) a skip of a test that proves compatibility with something
outside kafkalog is a failure: everything under ``tests/interop``, ``tests/spark`` and ``tests/server``, any
test file named ``*interop*`` and any test marked ``interop`` or ``spark`` (the Java harness, Spark, the client libraries, kafkajs, kcat), and
everything under ``tests/objstore`` (``OBJECT_STORAGE_DIRS``: obstore and the real S3 server). The ``s3_server``
fixture (``tests/s3_server.py``: SeaweedFS on 127.0.0.1, one per session) fails rather than skips under the
switch wherever it is used. Other skips (no
``/proc``, running as root, no ``/dev/full``) stay skips; their reasons are printed at the end of the run.
"""

from __future__ import annotations

import gc
import os
import resource
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from interop.kafka_java import InteropUnavailable, KafkaJava
from s3_server import s3_server  # noqa: F401  (the session's S3 server fixture, for every test directory)

#: The environment switch: any of "1", "true", "yes" turns required skips into failures.
REQUIRE_ALL_ENV = "KAFKALOG_REQUIRE_ALL"
#: Test directories (relative to the repository) whose tests must not skip under the switch.
REQUIRED_DIRS = ("tests/interop/", "tests/spark/", "tests/server/")
OBJECT_STORAGE_DIRS: tuple[str, ...] = ("tests/objstore/", "tests/tiered/", "tests/tiering/")
REQUIRED_MARKERS = ("interop", "spark")


# A storage client without credentials asks the cloud's instance-metadata service (169.254.169.254) for
# some: in tests it must ask a closed loopback port instead, never the network.
os.environ.setdefault("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
os.environ.setdefault("AZURE_MSI_ENDPOINT", "http://127.0.0.1:9/metadata/identity/oauth2/token")


def require_all() -> bool:
    """Whether ``KAFKALOG_REQUIRE_ALL`` is set (CI)."""
    return os.environ.get(REQUIRE_ALL_ENV, "").strip().lower() in ("1", "true", "yes")


def _required(nodeid: str, markers: set[str]) -> bool:
    """Whether a skip of ``nodeid`` is a failure under the switch. A module skipped while it is collected
    has no markers yet: files named ``*interop*`` (``tests/cli/test_dump_interop.py``, ...) count by name."""
    path = nodeid.split("::", 1)[0]
    return (
        path.startswith(REQUIRED_DIRS + OBJECT_STORAGE_DIRS)
        or "interop" in path.rsplit("/", 1)[-1]
        or bool(markers & set(REQUIRED_MARKERS))
    )


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


_ALLOWED: list[tuple[str, str]] = []


def _enforce(report: pytest.CollectReport | pytest.TestReport, markers: set[str]) -> None:
    """Under the switch, turn a required skip into a failure; remember an allowed one."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if _required(report.nodeid, markers):
        report.outcome = "failed"
        report.longrepr = (
            f"{REQUIRE_ALL_ENV} is set and this test may not skip (interop / Spark / server / object storage): "
            f"{reason}"
        )
    else:
        _ALLOWED.append((report.nodeid, reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if require_all():
        _enforce(outcome.get_result(), {mark.name for mark in item.iter_markers()})


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    if require_all():  # a module-level skip or importorskip
        _enforce(outcome.get_result(), set())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if require_all():
        terminalreporter.section(f"skips allowed under {REQUIRE_ALL_ENV}")
        for nodeid, reason in _ALLOWED:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line(f"{len(_ALLOWED)} allowed skip(s)")


settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def kafka_java() -> Iterator[KafkaJava]:
    """Apache Kafka's own record code (kafka-clients jar + our Java harness), one JVM per session.

    Skips with the reason when Java 17 or the jars (PyPI ``shigawire-apache-flink-libraries``) are missing.
    """
    try:
        harness = KafkaJava.locate()
    except InteropUnavailable as exc:
        pytest.skip(f"Kafka interop harness unavailable: {exc.reason}")
    with harness:
        yield harness


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Give back descriptors that only garbage holds before the suite runs out of them.

    A closed segment's descriptor is pointed at /dev/null and released when its file object is collected
    (``storage/file_records.py``: the number is never reused while a lock-free reader may hold it). Objects in
    reference cycles wait for the cyclic GC, which a long pytest process runs rarely, so ~2,400 tests in one
    process accumulate them (CI reached ``RLIMIT_NOFILE`` 1024 in the long SIGKILL test, whose own rounds
    leak none). Past a quarter of the limit, collect (a listing of /proc/self/fd costs ~0.1 ms a test)."""
    try:
        count = len(os.listdir("/proc/self/fd"))
    except OSError:
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and count > soft // 4:
        gc.collect()
