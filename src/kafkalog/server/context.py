"""RequestContext: what a handler gets besides the decoded request.

A context is made per request by the connection layer. It carries the shared :class:`~kafkalog.server.broker.
Broker`, the request header (api key, version, correlation id, client id), the client's address, and the
:class:`~kafkalog.server.dispatch.ApiSpec` being served, whose ``response_class`` builds the response at the
request's version (:meth:`RequestContext.response`), and whether the request frame is the request's own
(:attr:`RequestContext.owns_frame`: views of it may be changed in place). A handler may ask for the
connection to be closed after its response (:meth:`RequestContext.close_connection`), as Kafka does for a
failed ``acks=0`` produce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkalog.server.broker import Broker
from kafkalog.server.dispatch import ApiSpec
from kafkalog.server.protocol import Message, RequestHeaderInfo

__all__ = ["RequestContext"]


@dataclass
class RequestContext:
    """One request being handled (see the module doc)."""

    broker: Broker
    spec: ApiSpec
    header: RequestHeaderInfo
    client_host: str = ""
    client_port: int = 0
    close_after_response: bool = False
    #: The request frame is this request's own (no one else reads, changes or reuses it), so views of it in
    #: the decoded request (a Produce request's records) may be changed in place: Produce assigns offsets in
    #: the frame instead of a copy. False (the default) when the caller keeps the frame: handlers only read it.
    owns_frame: bool = False

    @property
    def api_key(self) -> int:
        """The request's API key."""
        return self.header.api_key

    @property
    def api_version(self) -> int:
        """The request's API version (the response is encoded at the same version)."""
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        """The client id of the request header."""
        return self.header.client_id

    def response(self, **fields: Any) -> Message:
        """A response message of this API at the request's version, fields not given at their defaults."""
        return self.spec.response_class[self.api_version](**fields)

    def close_connection(self) -> None:
        """Close the connection once the response (if any) is written."""
        self.close_after_response = True
