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
* :func:`decode_request` decodes header (v1, or v2 with tagged fields for flexible versions) and body;
* :func:`encode_response` frames ``size | response header | body``; ApiVersions responses always use
  response header v0 (KIP-511), which kafka-python's ``ApiVersionsResponse`` already encodes;
* :func:`encode_unsupported_api_versions`: Kafka's answer to an ApiVersions request at a version it does not
  know: error 35 in the **v0** body layout, listing the ApiVersions range so the client can step down.

Every decoding failure is a :class:`~kafkalog.server.errors.MalformedRequestError`.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse

from kafkalog.server.errors import ErrorCode, MalformedRequestError

__all__ = [
    "API_VERSIONS_KEY",
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

API_VERSIONS_KEY: Final = 18
_HEADER_START = struct.Struct(">hhi")
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


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the first 8 bytes of every request header version."""
    if len(frame) < _HEADER_START.size:
        raise MalformedRequestError(f"request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation_id = _HEADER_START.unpack_from(frame, 0)
    return int(key), int(version), int(correlation_id)


def decode_request(
    frame: bytes | bytearray | memoryview, request_class: Message, version: int
) -> tuple[RequestHeaderInfo, Message]:
    """Decode a whole request frame (header and body, without the size prefix) at ``version``."""
    try:
        request = request_class.decode(bytes(frame), version=version, header=True)
        header = request.header
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


def encode_response(response: Message, version: int, correlation_id: int) -> bytes | bytearray:
    """``int32 size | response header | body`` for ``response`` at ``version``."""
    if version != response.API_VERSION:
        response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    data: bytes | bytearray = response.encode(header=True, framed=True)
    return data


def encode_unsupported_api_versions(
    correlation_id: int, min_version: int, max_version: int
) -> bytes | bytearray:
    """The ApiVersions v0 error response Kafka sends for an unsupported ApiVersions version (KIP-511)."""
    entry = ApiVersionsResponse.ApiVersion(
        api_key=API_VERSIONS_KEY, min_version=min_version, max_version=max_version
    )
    response = ApiVersionsResponse[0](error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[entry])
    return encode_response(response, 0, correlation_id)
