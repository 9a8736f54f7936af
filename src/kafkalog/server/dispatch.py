"""The API registry: which handler serves which API key, at which versions.

A handler module registers one ``async def handler(ctx: RequestContext, request) -> response`` per API key
with :func:`api` (or :meth:`Registry.register`), optionally narrowing the version range; the default range
is the one of Kafka's JSON schema for that API (``validVersions``, as shipped by kafka-python). The
connection layer routes each decoded request to its handler, and the ApiVersions handler advertises exactly
what is registered here, so adding an API is adding a module (see :mod:`kafkalog.server` for the contract).

Invariants owned here: one handler per API key; a registered range is never outside the schema's range
(kafka-python could not encode or decode it). Register at import time, before a server starts: ApiVersions
answers from the registry as it is at each request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from kafkalog.server.protocol import Message, message_classes, schema_versions

if TYPE_CHECKING:
    from kafkalog.server.context import RequestContext

__all__ = ["REGISTRY", "ApiSpec", "Handler", "Registry", "api"]

#: ``async def handler(ctx, request) -> response``; returning None sends no response (Produce with acks=0).
Handler: TypeAlias = "Callable[[RequestContext, Message], Awaitable[Message | None]]"


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One registered API: key, name, supported versions, handler and kafka-python message classes."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    request_class: Message
    response_class: Message

    def supports(self, version: int) -> bool:
        """Whether ``version`` is in the advertised range."""
        return self.min_version <= version <= self.max_version


class Registry:
    """API key -> :class:`ApiSpec` (see the module doc)."""

    def __init__(self) -> None:
        self._apis: dict[int, ApiSpec] = {}

    def register(
        self,
        api_key: int,
        handler: Handler,
        *,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> ApiSpec:
        """Register ``handler`` for ``api_key`` at ``[min_version, max_version]`` (default: the schema's)."""
        key = int(api_key)
        if key in self._apis:
            raise ValueError(f"API key {key} ({self._apis[key].name}) is already registered")
        classes = message_classes().get(key)
        if classes is None:
            raise ValueError(f"kafka-python has no message schema for API key {key}")
        request_class, response_class = classes
        low, high = schema_versions(request_class)
        lo = low if min_version is None else min_version
        hi = high if max_version is None else max_version
        if not low <= lo <= hi <= high:
            raise ValueError(f"versions {lo}..{hi} of API key {key} are outside the schema's {low}..{high}")
        name = str(request_class.name).removesuffix("Request")
        spec = ApiSpec(key, name, lo, hi, handler, request_class, response_class)
        self._apis[key] = spec
        return spec

    def api(
        self, api_key: int, *, min_version: int | None = None, max_version: int | None = None
    ) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`register`."""

        def decorate(handler: Handler) -> Handler:
            self.register(api_key, handler, min_version=min_version, max_version=max_version)
            return handler

        return decorate

    def get(self, api_key: int) -> ApiSpec | None:
        """The spec registered for ``api_key``, if any."""
        return self._apis.get(api_key)

    def __iter__(self) -> Iterator[ApiSpec]:
        return iter(sorted(self._apis.values(), key=lambda s: s.api_key))

    def __len__(self) -> int:
        return len(self._apis)

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._apis


#: The registry every built-in handler module registers into (imported by :mod:`kafkalog.server.apis`).
REGISTRY = Registry()


def api(
    api_key: int, *, min_version: int | None = None, max_version: int | None = None
) -> Callable[[Handler], Handler]:
    """Register the decorated handler in :data:`REGISTRY` (see :meth:`Registry.register`)."""
    return REGISTRY.api(api_key, min_version=min_version, max_version=max_version)
