"""ApiVersions (key 18): advertises exactly the registered APIs and version ranges.

Versions 0-4. From v3 the request names the client software; Kafka refuses names and versions outside
``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` with INVALID_REQUEST, and so does this handler. A request at a
version above 4 never reaches here: the connection layer answers it with error 35 in the v0 layout.
"""

from __future__ import annotations

import re
from typing import Final

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode
from kafkalog.server.protocol import Message

__all__ = ["handle_api_versions"]

_SOFTWARE: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _valid_software(value: str | None) -> bool:
    return value is not None and _SOFTWARE.fullmatch(value) is not None


@api(ApiKey.ApiVersions)
async def handle_api_versions(ctx: RequestContext, request: Message) -> Message:
    """Every registered API with its version range (or INVALID_REQUEST for bad client software names)."""
    if ctx.api_version >= 3 and not (
        _valid_software(request.client_software_name) and _valid_software(request.client_software_version)
    ):
        return ctx.response(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    keys = [
        ApiVersionsResponse.ApiVersion(
            api_key=s.api_key, min_version=s.min_version, max_version=s.max_version
        )
        for s in ctx.broker.registry
    ]
    return ctx.response(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0)
