"""Opening a data directory in object storage: the store for a URL, and the layout its keys show.

Invariant owned here: a URL becomes exactly one :class:`~kafkalog.objstore.ObjectStore` (rooted at the URL's
bucket and prefix, opened with the caller's storage options) and one layout, detected from the keys under
the root (or forced by the caller): ``logdir`` (a copy of a log dir: ``<topic>-<n>/<offset>.log``). The
storage options travel with the reader (Spark pickles them to executors) and are never part of a ``repr``
or a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kafkalog.errors import InvalidConfigurationError
from kafkalog.log.readonly import RemoteLayout
from kafkalog.objstore import ObjectStore, open_store
from kafkalog.readonly.copies import LogDirCopy

__all__ = ["LAYOUTS", "open_layout"]

#: Layout names a caller may force (``layout=`` / the ``layout`` option).
LAYOUTS: Final = ("logdir",)


def open_layout(
    url: str,
    storage_options: Mapping[str, str],
    *,
    layout: str | None = None,
    store: ObjectStore | None = None,
) -> RemoteLayout:
    """The layout of the data at ``url`` (``store``: one already open at that root)."""
    if layout is not None and layout not in LAYOUTS:
        raise InvalidConfigurationError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if store is None:
        store = open_store(url, storage_options)
    return LogDirCopy(store, "")
