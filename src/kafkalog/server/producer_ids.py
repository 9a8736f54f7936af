"""Producer id allocation for InitProducerId: unique for the life of the data directory.

Kafka hands out producer ids in blocks reserved in the cluster metadata (``ProducerIdManager``), so a
restarted broker never gives a new producer an id an old one used: a reused id with epoch 0 and sequence 0
would be taken for the old producer (a duplicate, or an out-of-order sequence).

kafkalog keeps the same guarantee with one small file per data directory, ``kafkalog-producer-ids`` in the
first log dir (one line, the end of the reserved block; written atomically with fsync **before** any id of
the new block is handed out). At startup the next id is also raised above every producer id still present
in any partition's producer state, which covers a data dir written by Kafka or by an older kafkalog.
Allocation is thread-safe; a block reservation is the only I/O (one fsync per :data:`BLOCK_SIZE` ids).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from kafkalog._durable import atomic_write
from kafkalog.errors import KafkaStorageError

__all__ = ["BLOCK_SIZE", "PRODUCER_ID_FILE", "ProducerIdManager"]

PRODUCER_ID_FILE: Final = "kafkalog-producer-ids"
BLOCK_SIZE: Final = 1000
_MAX_PRODUCER_ID: Final = 2**63 - 1


class ProducerIdManager:
    """Hands out producer ids (see the module doc)."""

    def __init__(self, log_dir: Path, seen_producer_ids: Iterable[int] = ()) -> None:
        self._path = Path(log_dir) / PRODUCER_ID_FILE
        self._lock = threading.Lock()
        reserved = self._read()
        highest_seen = max((pid for pid in seen_producer_ids if pid >= 0), default=-1)
        self._next = max(reserved, highest_seen + 1)
        self._block_end = self._next  # nothing reserved yet in this process

    def _read(self) -> int:
        try:
            text = self._path.read_text().strip()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {self._path}: {exc}") from exc
        try:
            value = int(text)
        except ValueError:
            raise KafkaStorageError(f"corrupt producer id block file {self._path}: {text[:40]!r}") from None
        if not 0 <= value <= _MAX_PRODUCER_ID:
            raise KafkaStorageError(f"corrupt producer id block file {self._path}: {value}")
        return value

    def next_id(self) -> int:
        """A producer id never handed out before in this data directory."""
        with self._lock:
            if self._next >= self._block_end:
                end = self._next + BLOCK_SIZE
                try:
                    atomic_write(self._path, f"{end}\n".encode())
                except OSError as exc:
                    raise KafkaStorageError(f"cannot reserve producer ids in {self._path}: {exc}") from exc
                self._block_end = end
            pid = self._next
            self._next += 1
            return pid
