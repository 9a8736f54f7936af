"""Kafka's default partitioner: which partition a record with a given key lands in.

Invariant owned here: for a non-null key, the partition is ``(murmur2(key) & 0x7fffffff) % num_partitions``,
bit for bit what ``org.apache.kafka.clients.producer.internals.BuiltInPartitioner.partitionForKey`` computes
(``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions``), so data written through kafkalog lands where
a Kafka producer would have put it. ``murmur2`` is Kafka's variant of MurmurHash2: seed ``0x9747b28c``,
little-endian 4-byte blocks, 32-bit wrap-around arithmetic, the tail bytes mixed in the ``switch`` fall-through
order. Null keys have no hash: Kafka's producer spreads them with a sticky partition per batch;
:class:`NullKeyPartitioner` does the same (round robin, one partition per ``sticky_records`` records).

One numba kernel computes the hash; :func:`murmur2` hashes one key, :func:`partitions_for_keys` a whole
Arrow-style column (``offsets`` + ``data``) in one call.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numba
import numpy as np
import numpy.typing as npt

from kafkalog.jit import CACHE

__all__ = [
    "NullKeyPartitioner",
    "murmur2",
    "partition_for_key",
    "partitions_for_keys",
    "to_positive",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@numba.njit(cache=CACHE, nogil=True)
def _murmur2(data: npt.NDArray[np.uint8], start: int, end: int) -> int:  # pragma: no cover - compiled
    length = end - start
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        p = start + i * 4
        k = int(data[p]) | (int(data[p + 1]) << 8) | (int(data[p + 2]) << 16) | (int(data[p + 3]) << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = start + (length & ~3)
    rem = length % 4
    if rem == 3:
        h ^= int(data[tail + 2]) << 16
    if rem >= 2:
        h ^= int(data[tail + 1]) << 8
    if rem >= 1:
        h ^= int(data[tail])
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h  # unsigned 32-bit value of Java's int


@numba.njit(cache=CACHE, nogil=True)
def _partitions(
    offsets: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    valid: npt.NDArray[np.bool_],
    num_partitions: int,
    out: npt.NDArray[np.int32],
) -> None:  # pragma: no cover - compiled
    for i in range(offsets.shape[0] - 1):
        if valid[i]:
            out[i] = (_murmur2(data, offsets[i], offsets[i + 1]) & 0x7FFFFFFF) % num_partitions
        else:
            out[i] = -1


def murmur2(key: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2(key)`` as a signed 32-bit int (what Java returns)."""
    arr = np.frombuffer(key, dtype=np.uint8) if len(key) else np.zeros(0, dtype=np.uint8)
    h = int(_murmur2(arr, 0, arr.shape[0]))
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: ``abs(MIN_VALUE)`` is negative in Java)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


def partitions_for_keys(
    offsets: npt.NDArray[np.int64] | Sequence[int],
    data: npt.NDArray[np.uint8] | bytes,
    num_partitions: int,
    valid: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.int32]:
    """Partitions for a column of keys given as ``offsets`` (n+1 entries) into ``data``; -1 where ``valid`` is
    False (null keys, which the caller spreads with a :class:`NullKeyPartitioner`)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    offs = np.asarray(offsets, dtype=np.int64)
    buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray | memoryview) else data
    if buf.shape[0] == 0:
        buf = np.zeros(1, dtype=np.uint8)
    n = max(offs.shape[0] - 1, 0)
    ok = np.ones(n, dtype=np.bool_) if valid is None else np.asarray(valid, dtype=np.bool_)
    out = np.empty(n, dtype=np.int32)
    if n:
        _partitions(offs, buf, ok, num_partitions, out)
    return out


class NullKeyPartitioner:
    """Spreads null-key records the way Kafka's producer does: a sticky partition for a run of records
    (``sticky_records``, standing in for Kafka's ``batch.size`` worth of data), then the next one, round robin.
    """

    def __init__(self, num_partitions: int, sticky_records: int = 1000, start: int = 0) -> None:
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        if sticky_records <= 0:
            raise ValueError(f"sticky_records must be positive, got {sticky_records}")
        self.num_partitions = num_partitions
        self.sticky_records = sticky_records
        self._cycle = itertools.cycle(range(num_partitions))
        for _ in range(start % num_partitions):
            next(self._cycle)
        self._current = next(self._cycle)
        self._used = 0

    def next_partition(self) -> int:
        """The partition for the next null-key record."""
        if self._used >= self.sticky_records:
            self._current = next(self._cycle)
            self._used = 0
        self._used += 1
        return self._current
