"""kafkalog: Apache Kafka's partition log storage engine, in Python, byte-compatible with Kafka's on-disk format."""

from __future__ import annotations

from kafkalog.records.kernels import warm_up

__all__ = ["warm_up"]

__version__ = "0.1.0"
