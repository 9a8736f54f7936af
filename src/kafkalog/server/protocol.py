"""Glue between the wire and kafka-python's message classes (Kafka's own JSON schemas); no schema lives here.

kafka-python 3 ships Kafka's ``clients/src/main/resources/common/message/*.json`` and compiles them into
``ApiMessage`` classes that encode and decode every version, flexible ones included (compact strings and
arrays, tagged fields). A client encodes requests and decodes responses; this module does the mirror:

* :func:`message_classes` finds the request and response class of every API key by walking kafka-python's
  ``ApiMessage`` subclasses (no table of ours to keep in step);
* :func:`schema_versions` is the version range of a class's JSON ``validVersions`` (kafka-python itself
  widens the minimum to 0 for its client; a server must advertise Kafka's real floor);
* :func:`peek_header` reads the fixed start of a request header (api key, version, correlation id), enough
  to route the frame, answer an unsupported ApiVersions, or decide to close;
* :func:`decode_request` decodes header (v1, or v2 with tagged fields for flexible versions) and body; a
  Produce request's ``records`` are *views* of the frame (no copy; see below); a null (length -1) in a field
  the schema does not let be null at that version is malformed, as Kafka's decoders say (kafka-python would
  hand the handler a None);
* :func:`encode_response` frames ``size | response header | body``, optionally into a buffer the connection
  reuses (no copy of a large fetch response out of the encoder); ApiVersions responses always use response
  header v0 (KIP-511), which kafka-python's ``ApiVersionsResponse`` already encodes;
* :func:`encode_unsupported_api_versions`: Kafka's answer to an ApiVersions request at a version it does not
  know: error 35 in the **v0** body layout, listing the ApiVersions range so the client can step down.

Every decoding failure is a :class:`~kafkalog.server.errors.MalformedRequestError`.

Zero-copy records: kafka-python's generated decoders copy every ``bytes``/``records`` field out of the frame
(``bytes(data[pos:pos+n])``), 1 MiB for a 1 MiB produce batch. For ProduceRequest the server decodes with
its own compilation of kafka-python's schema (:func:`_view_decoder`: kafka-python's code generator, with
:class:`_RecordsView` as the codec of the ``records`` field), in which the field is a ``memoryview`` slice of
the frame instead (and a length running past the frame is an error, not a short value). The one change to
kafka-python's objects, made once at import: the ``records`` field of its ProduceRequest schema gets a decode
emitter (an attribute of that field object) that picks :class:`_RecordsView` only inside the server's
compilation and emits kafka-python's own code everywhere else. So nothing of kafka-python changes for anyone
else: its own ``ProduceRequest.decode`` still returns ``bytes``, every encoder is untouched, and the
kafka-python clients used in the same process (tests, benchmarks) decode their responses exactly as before.
The views live as long as the request object: the frame must not be changed or resized until the request has
been handled (the connection's frames are private buffers, see :mod:`kafkalog.server.connection`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBuffer
from kafka.protocol.schemas.fields.codecs.types import Bytes, UnsignedVarInt32
from kafka.protocol.schemas.fields.codegen import CodegenContext

from kafkalog.server.errors import ErrorCode, MalformedRequestError

_log = logging.getLogger(__name__)

__all__ = [
    "API_VERSIONS_KEY",
    "Frame",
    "Message",
    "RequestHeaderInfo",
    "decode_request",
    "encode_response",
    "encode_unsupported_api_versions",
    "message_classes",
    "peek_header",
    "schema_versions",
]

#: A kafka-python message object (request, response or nested struct); kafka-python has no type stubs.
Message: TypeAlias = Any
#: A request frame as the connection hands it over (without its size prefix).
Frame: TypeAlias = bytes | bytearray | memoryview

API_VERSIONS_KEY: Final = 18
_HEADER_START = struct.Struct(">hhi")
_FRAME_SIZE: Final = struct.Struct(">i")
#: Bytes copied to read a request header (api key, version, correlation id, client id, tagged fields).
_HEADER_PREFIX: Final = 1024
_LOADED = (kafka.protocol.admin, kafka.protocol.consumer, kafka.protocol.metadata, kafka.protocol.producer)


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    """The request header fields a handler may need."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _walk(cls: Any) -> list[Any]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_walk(sub))
    return out


@functools.cache
def message_classes() -> dict[int, tuple[Message, Message]]:
    """API key -> (request class, response class), from kafka-python's compiled JSON schemas."""
    requests: dict[int, Message] = {}
    responses: dict[int, Message] = {}
    for cls in _walk(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or getattr(cls, "_json", None) is None:
            continue  # a versioned view (Foo[3]) of a primary class
        table = requests if cls.is_request() else responses
        table.setdefault(int(cls.API_KEY), cls)
    return {key: (requests[key], responses[key]) for key in requests if key in responses}


def schema_versions(cls: Message) -> tuple[int, int]:
    """The ``validVersions`` range of a message class's JSON schema (Kafka's own floor, not kafka-python's 0)."""
    text = str(cls.json["validVersions"])
    low, _, high = text.partition("-")
    if text.endswith("+"):
        raise ValueError(f"open-ended validVersions {text!r} in {cls.name}")
    return int(low), int(high or low)


def peek_header(frame: Frame) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the first 8 bytes of every request header version."""
    if len(frame) < _HEADER_START.size:
        raise MalformedRequestError(f"request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation_id = _HEADER_START.unpack_from(frame, 0)
    return int(key), int(version), int(correlation_id)


def decode_request(frame: Frame, request_class: Message, version: int) -> tuple[RequestHeaderInfo, Message]:
    """Decode a whole request frame (header and body, without the size prefix) at ``version``.

    kafka-python's ``decode(header=True)`` copies the whole frame to read the header; here the header is read
    from a copy of the frame's first :data:`_HEADER_PREFIX` bytes (the whole frame only when the header is
    longer) and the body is decoded in place, from a view of the frame. A ProduceRequest's ``records`` are
    views of the frame (module doc), writable when the frame is."""
    view = memoryview(frame)
    try:
        header, pos = _decode_header(view, request_class, version)
        decoder = _view_decoder(request_class, version) if request_class in _VIEW_CLASSES else None
        if decoder is not None:
            request, _ = decoder(view, pos)
        else:
            request = request_class.decode(view[pos:], version=version, header=False)
        _check_nulls(request, _null_plan(request_class, version), "")
        info = RequestHeaderInfo(
            int(header.request_api_key),
            int(header.request_api_version),
            int(header.correlation_id),
            header.client_id,
        )
    except Exception as exc:  # kafka-python raises ValueError, struct.error, IndexError, UnicodeError...
        raise MalformedRequestError(
            f"cannot decode {getattr(request_class, 'name', request_class)} v{version}: {exc}"
        ) from exc
    return info, request


#: Per field of a struct at one version: (name, nullable, the plan of its struct or struct array, is an array,
#: is an array of strings or bytes, whose elements are never null).
_NullPlan: TypeAlias = tuple[tuple[str, bool, "_NullPlan | None", bool, bool], ...]


@functools.cache
def _null_plan(request_class: Message, version: int) -> _NullPlan:
    """What :func:`_check_nulls` looks at in a request of ``request_class`` at ``version`` (from its schema)."""

    def plan(struct: Any) -> _NullPlan:
        fields = struct.fields
        out = []
        for f in fields.values() if isinstance(fields, dict) else fields or ():
            if not f.for_version_q(version) or f.tagged_field_q(version):
                continue
            sub = plan(f) if f.is_struct() or f.is_struct_array() else None
            # kafka-python decodes the zero UUID (Kafka's Uuid.ZERO_UUID, never null on the wire) as None
            nullable = f.nullable_for_version_q(version) or f.type_str == "uuid"
            texts = f.is_array() and sub is None and f.array_of.type_str in ("string", "bytes")
            out.append((f.name, nullable, sub, f.is_array(), texts))
        return tuple(out)

    return plan(request_class._struct)  # noqa: SLF001  (kafka-python's message schema: no public accessor)


def _check_nulls(obj: Message, plan: _NullPlan, path: str) -> None:
    """Kafka's decoders refuse null in a non-nullable field ("non-nullable field X was serialized as null",
    the request is malformed); kafka-python's decode it as None, which no handler expects."""
    for name, nullable, sub, is_array, texts in plan:
        value = getattr(obj, name)
        if value is None:
            if not nullable:
                raise ValueError(f"non-nullable field {path}{name} was serialized as null")
        elif texts:
            if any(item is None for item in value):
                raise ValueError(f"an element of {path}{name} was serialized as null")
        elif sub is not None:
            for item in value if is_array else (value,):
                _check_nulls(item, sub, f"{path}{name}.")


def _decode_header(view: memoryview, request_class: Message, version: int) -> tuple[Message, int]:
    """The request header and the body's position. A read that ran short of the prefix ends at its end, so
    a header that stops before the prefix's end was read whole; anything else is read again from the frame."""
    if len(view) > _HEADER_PREFIX:
        stream = io.BytesIO(bytes(view[:_HEADER_PREFIX]))
        with contextlib.suppress(Exception):
            header = request_class.parse_header(stream, version=version)
            if stream.tell() < _HEADER_PREFIX:
                return header, stream.tell()
    stream = io.BytesIO(bytes(view))
    header = request_class.parse_header(stream, version=version)
    return header, stream.tell()


class _RecordsView(Bytes):  # type: ignore[misc]  # kafka-python has no type stubs
    """The ``records`` codec of the server's request decoders: kafka-python's :class:`Bytes` (its encoders are
    inherited unchanged) whose generated decode is a slice of the frame's memoryview, not a ``bytes`` copy."""

    @classmethod
    def emit_decode_from(cls, ctx: Any, var_name: str, indent: str, compact: bool = False) -> None:
        ln = ctx.next_var("ln")
        if compact:
            UnsignedVarInt32.emit_decode_from(ctx, ln, indent)
            ctx.emit(indent, f"{ln} -= 1")
        else:
            ctx.emit(indent, f'{ln} = unpack_from(">i", data, pos)[0]')
            ctx.emit(indent, "pos += 4")
        ctx.emit(indent, f"if {ln} < 0:")
        ctx.emit(indent, f"    {var_name} = None")
        ctx.emit(indent, "else:")
        ctx.emit(indent, f"    if pos + {ln} > len(data): raise ValueError('records run past the request')")
        ctx.emit(indent, f"    {var_name} = data[pos:pos+{ln}]")
        ctx.emit(indent, f"    pos += {ln}")


class _ViewCodegen(CodegenContext):  # type: ignore[misc]  # kafka-python has no type stubs
    """The code generation context of :func:`_view_decoder`: ``records`` fields use :class:`_RecordsView`."""


def _emit_records_decode(
    field: Any,
    ctx: Any,
    var_name: str,
    indent: str,
    version: Any = None,
    compact: bool = False,
    tagged: bool = False,
) -> None:
    """A ``records`` field's decode emitter: :class:`_RecordsView` in :func:`_view_decoder`'s compilations,
    the field's own (kafka-python's) everywhere else."""
    if isinstance(ctx, _ViewCodegen):
        _RecordsView.emit_decode_from(ctx, var_name, indent, compact=compact)
    else:
        type(field).emit_decode_from(
            field, ctx, var_name, indent, version=version, compact=compact, tagged=tagged
        )


def _hook_records_fields(field: Any) -> int:
    """Give every ``records`` field reachable by ``field``'s generated decoder :func:`_emit_records_decode`
    (an attribute of that field object only); returns how many."""
    inner = getattr(field, "array_of", None)
    if inner is not None and hasattr(inner, "_fields"):
        return _hook_records_fields(inner)
    hooked = 0
    for child in getattr(field, "_fields", None) or ():
        if getattr(child, "_type_str", None) == "records":
            try:
                child.emit_decode_from = functools.partial(_emit_records_decode, child)
            except AttributeError:  # a kafka-python whose fields take no attributes: records stay copies
                continue
            hooked += 1
        else:
            hooked += _hook_records_fields(child)
    return hooked


#: Request classes decoded by :func:`_view_decoder` (their ``records`` fields hooked once, at import).
_VIEW_CLASSES: Final = frozenset(cls for cls in (ProduceRequest,) if _hook_records_fields(cls._struct))
_ViewDecoder: TypeAlias = Callable[[memoryview, int], tuple[Message, int]]
_view_decoders: dict[tuple[Message, int], _ViewDecoder | None] = {}


def _view_decoder(request_class: Message, version: int) -> _ViewDecoder | None:
    """``f(data, pos) -> (request, end)``: kafka-python's compiled decoder of ``request_class`` at ``version``
    (its ``StructField.compiled_decode_from``, compiled by its own code generator from its own schema), with
    ``records`` as views of ``data``; compiled on first use and kept. None (kafka-python's own decode, which
    copies) for a version outside the class's range, or when the compilation fails: it relies on kafka-python
    internals (``CodegenContext``, ``emit_decode_from``), and a kafka-python that changed them must cost a
    copy, not the server."""
    key = (request_class, version)
    if key in _view_decoders:
        return _view_decoders[key]
    decoder: _ViewDecoder | None = None
    if 0 <= version <= request_class.max_version:
        try:
            decoder = _compile_view_decoder(request_class, version)
        except Exception:
            _log.warning(
                "cannot compile a zero-copy decoder of %s v%d; records are copied", request_class, version
            )
    _view_decoders[key] = decoder
    return decoder


def _compile_view_decoder(request_class: Message, version: int) -> _ViewDecoder:
    primary = request_class[None]
    # a shallow copy with the top-level data class resolved (kafka-python's decode() sets it for the compile)
    schema = copy.copy(primary._struct)  # noqa: SLF001  (kafka-python's schema, as its decode() uses it)
    schema._data_class = primary  # noqa: SLF001  (what kafka-python's decode() sets before compiling)
    flexible = primary.flexible_version_q(version)
    ctx = _ViewCodegen()
    ctx.lines.append("def _decode(data, pos):")
    schema.emit_decode_from(ctx, "obj", "    ", version=version, compact=flexible, tagged=flexible)
    ctx.emit("    ", "return obj, pos")
    exec(compile(ctx.source(), f"<kafkalog_decode:{schema.name}_v{version}>", "exec"), ctx.globs)
    decoder: _ViewDecoder = ctx.globs["_decode"]
    return decoder


def encode_response(
    response: Message, version: int, correlation_id: int, out: EncodeBuffer | None = None
) -> bytes | bytearray | memoryview:
    """``int32 size | response header | body`` for ``response`` at ``version``.

    With ``out`` (a kafka-python :class:`EncodeBuffer` the caller owns), the response is encoded by the same
    compiled kafka-python encoder into ``out`` and a view of ``out``'s bytes is returned: no copy out of the
    encoder's buffer (kafka-python's ``encode()`` returns a copy, 1 MiB for a 1 MiB fetch). The view is
    valid until ``out`` is used again."""
    if version != response.API_VERSION:
        response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    schema: Any = getattr(response, "_struct", None)
    if out is None or not hasattr(schema, "compiled_encode_into"):
        data: bytes | bytearray = response.encode(header=True, framed=True)
        return data
    # ApiMessage.encode(header=True, framed=True), into our buffer instead of the thread's pooled one
    flexible = response.flexible_version_q(version)
    out.reset()
    out.ensure(_FRAME_SIZE.size)
    out.pos = _FRAME_SIZE.size
    response.encode_header_into(out, flexible=flexible)
    schema.compiled_encode_into(version, compact=flexible, tagged=flexible)(response, out)
    _FRAME_SIZE.pack_into(out.buf, 0, out.pos - _FRAME_SIZE.size)
    return memoryview(out.buf)[: out.pos]


def encode_unsupported_api_versions(
    correlation_id: int, min_version: int, max_version: int
) -> bytes | bytearray | memoryview:
    """The ApiVersions v0 error response Kafka sends for an unsupported ApiVersions version (KIP-511)."""
    entry = ApiVersionsResponse.ApiVersion(
        api_key=API_VERSIONS_KEY, min_version=min_version, max_version=max_version
    )
    response = ApiVersionsResponse[0](error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[entry])
    return encode_response(response, 0, correlation_id)
