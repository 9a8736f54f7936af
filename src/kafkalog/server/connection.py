"""One client connection: framing, routing to handlers, responses in order, and what closes a connection.

Kafka's wire framing is ``int32 size | request`` in each direction. A connection is served like Kafka's
``SocketServer`` serves one: requests are handled **one at a time, in arrival order** (Kafka mutes the channel
while a request is in flight), so responses go out in request order and a client may pipeline freely.

What closes the connection (Kafka closes it too; nothing reaches a log):

* a size prefix that is negative or above ``socket.request.max.bytes`` (:class:`FrameTooLargeError`);
* a frame too short for a request header, or whose header/body does not decode (:class:`MalformedRequestError`);
* an API key that is not registered (:class:`UnknownApiKeyError`);
* a version outside the registered range (:class:`UnsupportedApiVersionError`) — except ApiVersions, which gets
  error 35 (UNSUPPORTED_VERSION) in the v0 body layout, as Kafka answers it (KIP-511);
* a handler that raises (a bug or an unexpected failure: logged with its traceback; the server keeps serving
  every other connection) or asks for it (``acks=0`` produce that failed, as Kafka does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kafkalog.server.broker import Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.errors import (
    FrameTooLargeError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedApiVersionError,
)
from kafkalog.server.protocol import (
    API_VERSIONS_KEY,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
    peek_header,
)

__all__ = ["Connection", "handle_frame"]

_log = logging.getLogger("kafkalog.server.connection")


async def handle_frame(
    broker: Broker, frame: bytes | bytearray, client: tuple[str, int] = ("", 0)
) -> tuple[bytes | bytearray | None, bool]:
    """Serve one request frame (without its size prefix): ``(framed response or None, close connection)``."""
    try:
        key, version, correlation_id = peek_header(frame)
        spec = broker.registry.get(key)
        if spec is None:
            raise UnknownApiKeyError(f"unknown API key {key}")
        if not spec.supports(version):
            if key == API_VERSIONS_KEY:
                return encode_unsupported_api_versions(
                    correlation_id, spec.min_version, spec.max_version
                ), False
            raise UnsupportedApiVersionError(
                f"{spec.name} v{version} is not supported (versions {spec.min_version}..{spec.max_version})"
            )
        header, request = decode_request(frame, spec.request_class, version)
    except ProtocolError as exc:
        _log.info("Closing connection from %s:%s: %s", client[0], client[1], exc)
        return None, True
    ctx = RequestContext(broker, spec, header, client[0], client[1])
    try:
        response = await spec.handler(ctx, request)
        if response is None:
            return None, ctx.close_after_response
        return encode_response(response, version, correlation_id), ctx.close_after_response
    except asyncio.CancelledError:
        raise
    except Exception:
        _log.exception(
            "Error handling %s v%d (correlation id %d) from %s:%s; closing the connection",
            spec.name,
            version,
            correlation_id,
            client[0],
            client[1],
        )
        return None, True


class Connection:
    """Serves one accepted socket until the client leaves, a closing error, or server shutdown."""

    def __init__(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client: tuple[str, int] = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)
        #: True while a request is being handled (shutdown lets it finish).
        self.busy = False
        self.closing = False

    async def _read_frame(self) -> bytes | None:
        try:
            head = await self.reader.readexactly(4)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        size = int.from_bytes(head, "big", signed=True)
        limit = self.broker.config.socket_request_max_bytes
        if size < 0 or size > limit:
            exc = FrameTooLargeError(f"request size {size} is outside [0, socket.request.max.bytes={limit}]")
            _log.warning("Closing connection from %s:%s: %s", self.client[0], self.client[1], exc)
            return None
        try:
            return await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def run(self) -> None:
        """The read-handle-respond loop (see the module doc)."""
        try:
            while not self.closing:
                frame = await self._read_frame()
                if frame is None:
                    return
                self.busy = True
                try:
                    data, close = await handle_frame(self.broker, frame, self.client)
                    if data is not None:
                        self.writer.write(data)
                        await self.writer.drain()
                finally:
                    self.busy = False
                if close:
                    return
        except ConnectionError:
            return
        except Exception:  # a transport failure we did not foresee: this connection only
            _log.exception("Connection from %s:%s failed; closing it", self.client[0], self.client[1])
        finally:
            self.close()

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.closing = True
        with contextlib.suppress(Exception):
            self.writer.close()
