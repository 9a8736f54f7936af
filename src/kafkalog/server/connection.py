"""One client connection: framing, routing to handlers, responses in order, and what closes a connection.

Kafka's wire framing is ``int32 size | request`` in each direction. A connection is served like Kafka's
``SocketServer`` serves one: requests are handled **one at a time, in arrival order** (Kafka mutes the channel
while a request is in flight), so responses go out in request order and a client may pipeline freely.

What closes the connection (Kafka closes it too; nothing reaches a log):

* a size prefix that is negative or above ``socket.request.max.bytes`` (:class:`FrameTooLargeError`; refused
  as soon as the prefix arrives, before any of the body is read; the requests before it are still answered);
* a frame too short for a request header, or whose header/body does not decode (:class:`MalformedRequestError`);
* an API key that is not registered (:class:`UnknownApiKeyError`);
* a version outside the registered range (:class:`UnsupportedApiVersionError`) — except ApiVersions, which gets
  error 35 (UNSUPPORTED_VERSION) in the v0 body layout, as Kafka answers it (KIP-511);
* a handler that raises (a bug or an unexpected failure: logged with its traceback; the server keeps serving
  every other connection) or asks for it (``acks=0`` produce that failed, as Kafka does).

Reading (:class:`Connection` is an :class:`asyncio.BufferedProtocol`, so the kernel copies straight into our
buffers): small frames are copied out of one reused receive buffer (several pipelined requests per ``recv``);
a frame above :data:`DIRECT_FRAME_BYTES` gets a buffer of its own that the socket receives into directly,
allocated as the body arrives (:data:`FRAME_START_BYTES` at first, then doubled up to the declared size), so
a size prefix alone costs no more than that first buffer. Every frame buffer is reserved in the broker's
:class:`~kafkalog.server.memory_pool.MemoryPool` (``queued.max.request.bytes``) as it is allocated or grown,
until its request is answered; while the pool is full the connection stops reading (the bytes stay in the
kernel) and goes on, oldest first, when reservations are released (or when every request being received
waits: see the pool's progress rule).
Either way every frame handed to :func:`handle_frame` is a ``bytearray`` of its own, referenced by nothing
once its request is handled, and nothing reads from or writes to the receive buffer through it (so no view
of a frame can see reused bytes or pin the receive buffer). The connection hands frames over as *owned*
(``handle_frame(..., owned=True)``): a Produce request's records, decoded as views of the frame, are
appended in place, offsets assigned in the frame itself: between the kernel's receive and the log's write
a 1 MiB produce batch is copied only as far as it arrived before its frame got a buffer of its own (at most
the receive buffer's 64 KiB). While a request is handled the connection keeps reading the next ones (the
read-ahead: at most :data:`READ_AHEAD_BYTES` or :data:`READ_AHEAD_FRAMES` complete requests queued, plus one
being received), then pauses reading until the handler catches up; the requests are still handled strictly
one after the other.

:meth:`Connection.idle_for` is what ``connections.max.idle.ms`` measures: the time since the last bytes
received or request answered, 0 while a request is handled or the connection waits for the pool.

A connection that has a request received but is not handling one counts in
:attr:`Broker.ready_connections <kafkalog.server.broker.Broker.ready_connections>`: its request waits for the
event loop, which is what decides whether a large append or read is worth a thread hop
(:meth:`Broker.offload <kafkalog.server.broker.Broker.offload>`). A connection's own read-ahead does not count
(its requests wait for the one being handled, not for the loop).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import struct
from collections.abc import Callable
from typing import Final

from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBuffer

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
    Frame,
    Message,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
    peek_header,
)

__all__ = [
    "DIRECT_FRAME_BYTES",
    "FRAME_START_BYTES",
    "HEAVY_REQUEST_BYTES",
    "KEEP_OUT_BYTES",
    "READ_AHEAD_BYTES",
    "READ_AHEAD_FRAMES",
    "READ_BUFFER_BYTES",
    "TRIM_IDLE_S",
    "Connection",
    "handle_frame",
]

_log = logging.getLogger("kafkalog.server.connection")

#: The reused receive buffer that small requests are cut from.
READ_BUFFER_BYTES: Final = 64 * 1024
#: Frames larger than this are received straight into a buffer of their own (no copy out of the receive
#: buffer); it is at most half the receive buffer, so a smaller partial frame always fits once compacted.
DIRECT_FRAME_BYTES: Final = 32 * 1024
#: Read-ahead bounds: complete requests queued behind the one being handled before reading pauses.
READ_AHEAD_BYTES: Final = 4 * 1024 * 1024
READ_AHEAD_FRAMES: Final = 64
#: A direct frame's first buffer, unless more of it already arrived (then doubled as its bytes arrive, up to
#: its declared size): a size prefix alone never makes the server allocate or reserve more than this.
FRAME_START_BYTES: Final = 64 * 1024
_ZEROS: Final = bytes(1024 * 1024)
#: Requests larger than this are decoded and their responses encoded on the I/O threads (see handle_frame).
HEAVY_REQUEST_BYTES: Final = 1024 * 1024
_PRODUCE_KEY: Final = 0
#: A response buffer that grew beyond this (a huge fetch) is not kept for the next response.
KEEP_OUT_BYTES: Final = 8 * 1024 * 1024
#: A connection idle this long gives back a response buffer that grew (see :meth:`Connection.trim`).
TRIM_IDLE_S: Final = 1.0

_SIZE: Final = struct.Struct(">i")


async def handle_frame(
    broker: Broker,
    frame: Frame,
    client: tuple[str, int] = ("", 0),
    out: EncodeBuffer | None = None,
    *,
    owned: bool = False,
) -> tuple[bytes | bytearray | memoryview | None, bool]:
    """Serve one request frame (without its size prefix): ``(framed response or None, close connection)``.

    ``out``: encode the response into this buffer (the response is then a view of it; see
    :func:`~kafkalog.server.protocol.encode_response`). ``owned``: the frame is the request's own, changed by
    nobody else and dropped afterwards, so a handler may change it in place (Produce appends its records
    from the frame itself, see :attr:`RequestContext.owns_frame`); otherwise the frame is only read. The
    decoded request holds views of the frame: it must not be changed or resized until this returns."""
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
        # A large request (a Fetch naming 500k partitions...) is decoded and answered on the I/O threads: the
        # event loop goes on serving the other connections meanwhile (a Produce's decode is cheap: inline
        # unless another connection waits).
        heavy = len(frame) > HEAVY_REQUEST_BYTES and (key != _PRODUCE_KEY or broker.ready_connections > 0)
        if heavy:
            header, request = await broker.run_blocking(decode_request, frame, spec.request_class, version)
        else:
            header, request = decode_request(frame, spec.request_class, version)
    except ProtocolError as exc:
        _log.info("Closing connection from %s:%s: %s", client[0], client[1], exc)
        return None, True
    ctx = RequestContext(broker, spec, header, client[0], client[1], owns_frame=owned)
    try:
        response = await spec.handler(ctx, request)
        if response is None:
            return None, ctx.close_after_response
        if heavy:  # encoded, and the request's and response's objects freed, off the loop
            holder = [request, response]
            del request, response
            encoded = await broker.run_blocking(_encode_and_drop, holder, version, correlation_id, out)
            return encoded, ctx.close_after_response
        return encode_response(response, version, correlation_id, out), ctx.close_after_response
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


def _encode_and_drop(
    holder: list[Message], version: int, correlation_id: int, out: EncodeBuffer | None
) -> bytes | bytearray | memoryview:
    """Encode ``holder[1]`` (the response), then empty ``holder`` (request, response): a request with 500k
    entries takes ~0.5 s to free, on this I/O thread rather than the event loop."""
    encoded = encode_response(holder[1], version, correlation_id, out)
    holder.clear()
    return encoded


class Connection(asyncio.BufferedProtocol):
    """Serves one accepted socket until the client leaves, a closing error, or server shutdown.

    The protocol callbacks split the byte stream into frames (module doc); :meth:`run`, a task started when
    the connection is made, handles them one at a time. ``on_done`` is called once :meth:`run` ends.
    """

    def __init__(self, broker: Broker, on_done: Callable[[Connection], None] | None = None) -> None:
        self.broker = broker
        self.client: tuple[str, int] = ("", 0)
        #: True while a request is being handled (shutdown lets it finish).
        self.busy = False
        self.closing = False
        self._ready = False  # counted in broker.ready_connections (see _set_ready)
        #: The task running :meth:`run` (set when the connection is made).
        self.task: asyncio.Task[None] | None = None
        self._on_done = on_done
        self._transport: asyncio.Transport | None = None
        self._limit = broker.config.socket_request_max_bytes
        self._buf = bytearray(READ_BUFFER_BYTES)
        self._view = memoryview(self._buf)
        self._start = 0  # unparsed bytes of the receive buffer: [_start, _end)
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being received directly (grows as it arrives)
        self._frame_size = 0  # its declared size
        self._filled = 0
        #: queued.max.request.bytes: this connection's frame buffers, reserved in the broker's pool as they are
        #: allocated (or grown) until their requests are answered (see :mod:`kafkalog.server.memory_pool`).
        self._pool = broker.memory_pool
        self._reserved = 0
        self._memory_blocked = False  # waiting for the pool: reading paused
        self._wait_need = 0  # what it waits for
        self._granted = False  # the pool granted it beyond its limit (already counted in _reserved)
        self._growth_ready = False  # the direct frame's next growth is reserved
        #: The event loop's time of the last bytes received or request answered (connections.max.idle.ms).
        self.last_active = 0.0
        #: Complete frames not handled yet; None marks the end (EOF, lost, refused size): nothing follows.
        self._frames: collections.deque[Frame | None] = collections.deque()
        self._queued = 0
        self._ended = False
        self._frame_waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._lost = False
        #: Responses are encoded into this buffer, reused once the transport holds none of it.
        self._out = EncodeBuffer()

    # --- protocol callbacks (the event loop calls them) ---------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)
        loop = asyncio.get_running_loop()
        self.last_active = loop.time()
        self.task = loop.create_task(self.run())

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):
                frame = self._grow_frame()
            return memoryview(frame)[self._filled :]  # asyncio drops it before the next call: resizable then
        if self._end == len(self._buf):  # only a partial frame is left, at its end: move it to the front
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._ended:
            return
        self.last_active = self.broker.loop.time()
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled == self._frame_size:
                self._frame = None
                self._pool.stop_receiving(id(self))
                self._push(frame)
            elif self._filled == len(frame):  # full: reserve the next growth (made in get_buffer)
                need = min(self._frame_size, 2 * len(frame)) - len(frame)
                if self._pool.try_allocate(need):
                    self._reserved += need
                    self._growth_ready = True
                else:
                    self._block(need)
        else:
            self._end += nbytes
            self._parse()
        self._maybe_pause_reading()

    def eof_received(self) -> bool:
        self._end_frames()
        return True  # keep the transport open: the requests already read are still answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._end_frames()
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._writing_paused = True
        self.last_active = self.broker.loop.time()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.last_active = self.broker.loop.time()
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- framing ------------------------------------------------------------------------------------------
    def _parse(self) -> None:
        """Queue every complete frame of the receive buffer; start a direct frame for a large partial one."""
        view, start, end = self._view, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(view, start)
            if size < 0 or size > self._limit:
                exc = FrameTooLargeError(
                    f"request size {size} is outside [0, socket.request.max.bytes={self._limit}]"
                )
                _log.warning("Closing connection from %s:%s: %s", self.client[0], self.client[1], exc)
                self._end_frames()
                return
            available = end - start - 4
            if available >= size:
                if not self._reserve(size):
                    break  # no room in queued.max.request.bytes: reading paused until there is
                self._push(bytearray(view[start + 4 : start + 4 + size]))  # a copy: see the module doc
                start += 4 + size
                continue
            if size > DIRECT_FRAME_BYTES:
                # Allocated as the body arrives (_grow_frame), never from the size prefix alone.
                capacity = min(size, max(available, FRAME_START_BYTES))
                if not self._reserve(capacity):
                    break
                frame = bytearray(capacity)
                frame[:available] = view[start + 4 : end]
                self._frame, self._frame_size, self._filled = frame, size, available
                self._pool.start_receiving(id(self))
                start = end
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        if start and self._frame is None and len(self._buf) - start < DIRECT_FRAME_BYTES + 4:
            self._compact()

    def _grow_frame(self) -> bytearray:
        """Double the direct frame's buffer (up to its declared size) once the bytes received filled it.

        Grown in place from a shared block of zeros (a ``bytes(n)`` temporary per step costs far more in page
        faults: docs/benchmarks.md, "Design measurements"); a large block's ``realloc`` remaps its pages rather
        than copying them."""
        frame = self._frame
        assert frame is not None
        grown = min(self._frame_size, 2 * len(frame))
        if not self._growth_ready:  # not reserved by buffer_updated (cannot happen): count it anyway
            self._pool.used += grown - len(frame)
            self._reserved += grown - len(frame)
        self._growth_ready = False
        try:
            while len(frame) < grown:
                step = min(grown - len(frame), len(_ZEROS))
                frame += _ZEROS if step == len(_ZEROS) else memoryview(_ZEROS)[:step]
        except BufferError:  # a view of it is still alive (cannot resize): copy into a new buffer
            bigger = bytearray(grown)
            bigger[: len(frame)] = frame
            self._frame = frame = bigger
        return frame

    def _reserve(self, nbytes: int) -> bool:
        """Reserve a new frame's buffer in the broker's pool; False when the pool is full: reading pauses
        and :meth:`_memory_available` parses on."""
        if self._pool.try_allocate(nbytes):
            self._reserved += nbytes
            return True
        self._block(nbytes)
        return False

    def _block(self, nbytes: int) -> None:
        self._memory_blocked = True
        self._wait_need = nbytes
        self._pause_reading()
        self._pool.wait(id(self), nbytes, self._on_memory)

    def _on_memory(self, granted: bool) -> None:
        """The pool's call (maybe from inside another connection): note a grant now, go on from the loop."""
        if granted:
            self._reserved += self._wait_need
            self._granted = True
        self.broker.loop.call_soon(self._memory_available)

    def _release(self, size: int) -> None:
        size = min(size, self._reserved)
        if size:
            self._reserved -= size
            self._pool.release(size)

    def _memory_available(self) -> None:
        """Room in the pool (or a grant): grow the frame being received, or parse what waited; read on."""
        self._memory_blocked = False
        if self._ended or self.closing:
            return
        if self._frame is not None:  # waited to grow the frame being received
            if not self._granted:
                if not self._pool.try_allocate(self._wait_need):
                    self._block(self._wait_need)
                    return
                self._reserved += self._wait_need
            self._granted = False
            self._growth_ready = True
        else:
            self._parse()
            self._maybe_pause_reading()
        self._maybe_resume_reading()

    def _compact(self) -> None:
        start, end = self._start, self._end
        self._buf[: end - start] = bytes(self._view[start:end])  # a copy: the regions may overlap
        self._start, self._end = 0, end - start

    def _push(self, frame: Frame) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        self._set_ready()
        self._wake_reader()

    def _set_ready(self) -> None:
        """Keep ``broker.ready_connections`` in step: this connection counts while a received request waits
        and none is being handled (call after changing ``busy``, ``closing`` or the queue)."""
        frames = self._frames
        ready = not self.busy and not self.closing and bool(frames) and frames[0] is not None
        if ready != self._ready:
            self._ready = ready
            self.broker.ready_connections += 1 if ready else -1

    def _end_frames(self) -> None:
        """No frame follows the queued ones (EOF, connection lost, a refused size)."""
        if self._ended:
            return
        self._ended = True
        self._frames.append(None)
        self._frame = None  # its reservation is released by close()
        self._pool.stop_receiving(id(self))
        self._pause_reading()
        self._wake_reader()

    def _pause_reading(self) -> None:
        if self._transport is not None and not self._lost and not self._reading_paused:
            with contextlib.suppress(Exception):
                self._transport.pause_reading()
            self._reading_paused = True

    def _maybe_resume_reading(self) -> None:
        if (
            self._reading_paused
            and not self._ended
            and not self._memory_blocked
            and self._queued < READ_AHEAD_BYTES
            and len(self._frames) < READ_AHEAD_FRAMES
            and self._transport is not None
        ):
            self._reading_paused = False
            self._transport.resume_reading()

    def _wake_reader(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _maybe_pause_reading(self) -> None:
        if self._queued >= READ_AHEAD_BYTES or len(self._frames) >= READ_AHEAD_FRAMES:
            self._pause_reading()

    def trim(self, now: float) -> None:
        """Drop a grown response buffer once the connection has been idle for :data:`TRIM_IDLE_S` (an open
        but quiet connection keeps 64 KiB, not the up to :data:`KEEP_OUT_BYTES` of its largest response)."""
        if len(self._out.buf) > READ_BUFFER_BYTES and self.idle_for(now) >= TRIM_IDLE_S:
            transport = self._transport
            if transport is None or transport.get_write_buffer_size() == 0:
                self._out = EncodeBuffer()

    def idle_for(self, now: float) -> float:
        """Seconds since this connection last made progress, at the loop's ``now`` (connections.max.idle.ms):
        bytes received, a request answered, or its response's bytes taken by a client that had stopped
        reading (a response the client never reads counts as idle, as Kafka's selector counts it); 0 while
        a request is handled or the connection waits for queued.max.request.bytes."""
        if self.task is None:
            return 0.0
        if not self._writing_paused and (self.busy or self._memory_blocked):
            return 0.0
        return max(0.0, now - self.last_active)

    async def _next_frame(self) -> Frame | None:
        """The next request frame, in arrival order; None when no more will come."""
        while not self._frames:
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None
        frame = self._frames[0]
        if frame is None:
            return None  # stays queued: every later call answers None too
        self._frames.popleft()
        self._queued -= len(frame)
        self._set_ready()
        self._maybe_resume_reading()
        return frame

    def _response_buffer(self) -> EncodeBuffer:
        """The buffer to encode the next response into: the connection's own unless the transport may still
        hold a view of the previous response (it keeps what the socket did not take yet), or it grew too big
        (then a new one: the old one is freed once the transport lets go)."""
        transport = self._transport
        if len(self._out.buf) > KEEP_OUT_BYTES or (
            transport is not None and transport.get_write_buffer_size() > 0
        ):
            self._out = EncodeBuffer()
        return self._out

    async def _write(self, data: bytes | bytearray | memoryview) -> None:
        transport = self._transport
        if transport is None or self._lost or transport.is_closing():
            raise ConnectionResetError("connection closed")
        transport.write(data)
        if self._writing_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiter = waiter
            await waiter

    # --- the request loop ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """The read-handle-respond loop (see the module doc)."""
        try:
            while not self.closing:
                frame = await self._next_frame()
                if frame is None:
                    return
                self.busy = True
                self._set_ready()
                try:
                    size = len(frame)
                    data, close = await handle_frame(
                        self.broker, frame, self.client, self._response_buffer(), owned=True
                    )
                    del frame
                    self._release(size)
                    if data is not None:
                        await self._write(data)
                        data = None  # a view of the response buffer: it must not outlive the write (trim)
                finally:
                    self.busy = False
                    self.last_active = self.broker.loop.time()
                    self._set_ready()
                if close:
                    return
        except ConnectionError:
            return
        except Exception:  # a transport failure we did not foresee: this connection only
            _log.exception("Connection from %s:%s failed; closing it", self.client[0], self.client[1])
        finally:
            self.close()
            if self._on_done is not None:
                self._on_done(self)

    def abort(self) -> None:
        """Close the socket at once, dropping what the client did not read (an idle connection)."""
        self.close()
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.abort()

    def close(self) -> None:
        """Close the socket (idempotent); responses already written are still sent."""
        self.closing = True
        self._frames.clear()
        self._queued = 0
        self._pool.cancel(id(self))
        self._memory_blocked = False
        self._release(self._reserved)
        self._set_ready()
        self._ended = False
        self._end_frames()
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.close()
