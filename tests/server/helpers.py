"""A raw Kafka protocol client for the server tests: kafka-python's message classes over a plain socket."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

from kafkalog.log.log import Log
from kafkalog.records import MemoryRecords


class RawClient:
    """One blocking connection; :meth:`call` sends a request and decodes its response."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (a frame with its size prefix, or garbage)."""
        self.sock.sendall(data)

    def send(self, request: Any, version: int, client_id: str = "raw-test") -> int:
        """Encode and send ``request`` at ``version``; returns its correlation id."""
        self.correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation_id, client_id=client_id)
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        return self.correlation_id

    def recv_frame(self) -> bytes | None:
        """One response frame without its size prefix; None if the server closed the connection."""
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def call(self, request: Any, version: int) -> Any:
        """Send ``request`` and decode the response at the same version (header checked)."""
        correlation_id = self.send(request, version)
        frame = self.recv_frame()
        assert frame is not None, "the server closed the connection"
        response = _response_class(type(request)).decode(frame, version=version, header=True)
        assert response.header.correlation_id == correlation_id
        return response

    def closed(self, timeout: float = 5.0) -> bool:
        """Whether the server closes the connection (EOF) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _response_class(request_class: Any) -> Any:
    from kafkalog.server.protocol import message_classes

    return message_classes()[int(request_class.API_KEY)][1]


def frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return struct.pack(">i", len(payload)) + payload


def log_records(
    partition_dir: Path,
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """Every record of a partition directory read back with kafkalog's own ``Log`` (CRC-checked)."""
    out = []
    with Log.open(partition_dir) as log:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20)
            records = info.records
            mem = records if isinstance(records, MemoryRecords) else records.to_memory_records()
            last = offset
            for batch in mem.batches():
                batch.ensure_valid()
                for r in batch:
                    if r.offset >= offset and not batch.is_control_batch:
                        out.append((r.offset, r.key, r.value, [(h.key, h.value) for h in r.headers]))
                last = batch.next_offset
            if last <= offset:
                break
            offset = last
    return out


def producer_ids(data_dir: Path, topic: str, partitions: int) -> int:
    """How many distinct producer ids the topic's batches carry (every batch must carry one and a sequence)."""
    pids = set()
    for p in range(partitions):
        with Log.open(data_dir / f"{topic}-{p}") as log:
            info = log.read(log.log_start_offset, 1 << 30)
            mem = (
                info.records if isinstance(info.records, MemoryRecords) else info.records.to_memory_records()
            )
            for batch in mem.batches():
                assert batch.producer_id >= 0 and batch.base_sequence >= 0, batch
                pids.add(batch.producer_id)
    return len(pids)
