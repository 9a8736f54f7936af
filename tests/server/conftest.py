"""Fixtures of the server tests: a running :class:`KafkaServer` on a temporary data directory, Java clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.kafka_java import InteropUnavailable
from kafkalog.server import KafkaServer

from .java_clients import JavaClients


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """An empty data directory."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def server(data_dir: Path) -> Iterator[KafkaServer]:
    """A server on a free loopback port over ``data_dir``."""
    with KafkaServer(data_dir, port=0) as running:
        yield running


@pytest.fixture(scope="session")
def java_clients() -> JavaClients:
    """Apache Kafka's Java clients (compiled harness); skips with the reason when Java or the jars are missing."""
    try:
        return JavaClients.locate()
    except InteropUnavailable as exc:
        pytest.skip(f"Java Kafka clients unavailable: {exc.reason}")
