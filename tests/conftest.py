"""Shared pytest configuration: hypothesis profiles (``ci`` runs more examples) and the Kafka interop fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from interop.kafka_java import InteropUnavailable, KafkaJava

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
