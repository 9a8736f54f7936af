"""Random and mutated request frames for every registered API and version: an answer or a close, never a crash."""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from kafkalog.manager import LogManager
from kafkalog.server import ServerConfig, default_registry
from kafkalog.server.broker import Broker
from kafkalog.server.connection import handle_frame


def _valid_metadata_frame() -> bytes:
    request = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    request.API_VERSION = 12
    request.with_header(correlation_id=1, client_id="fuzz")
    return bytes(request.encode(header=True))


def test_random_frames_never_escape_the_connection(tmp_path: Path) -> None:
    rng = random.Random(12)
    registry = default_registry()
    base = _valid_metadata_frame()

    async def run(manager: LogManager) -> int:
        broker = Broker(manager, ServerConfig(), registry, asyncio.get_running_loop())
        answered = 0
        try:
            for spec in registry:
                for version in range(spec.min_version, spec.max_version + 1):
                    header = struct.pack(">hhih", spec.api_key, version, 7, 4) + b"fuzz"
                    for _ in range(12):
                        body = rng.randbytes(rng.randrange(0, 48))
                        if version >= 2:
                            body = b"\x00" + body  # empty tagged fields of a v2 header, sometimes
                        data, close = await handle_frame(broker, header + body)
                        assert data is not None or close
                        answered += data is not None
            for _ in range(300):  # bit flips of a valid request
                mutated = bytearray(base)
                for _ in range(rng.randrange(1, 4)):
                    mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
                data, close = await handle_frame(broker, bytes(mutated))
                assert data is not None or close
        finally:
            broker.close()
        return answered

    with LogManager.open(tmp_path / "data", background=False) as manager:
        manager.create_topic("t", 1)
        asyncio.run(run(manager))
        assert manager.get_log("t", 0).log_end_offset == 0  # nothing reached the log
