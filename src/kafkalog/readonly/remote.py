"""Opening a data directory in object storage: the store for a URL, and the layout its keys show.

Invariant owned here: a URL becomes exactly one :class:`~kafkalog.objstore.ObjectStore` (rooted at the URL's
bucket and prefix, opened with the caller's storage options) and one layout, detected from the keys under
the root (or forced by the caller): ``logdir`` (a copy of a log dir: ``<topic>-<n>/<offset>.log``). The
storage options travel with the reader (Spark pickles them to executors) and are never part of a ``repr``
or a message.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Final

from kafkalog.errors import RemoteStorageError
from kafkalog.log.readonly import RemoteLayout
from kafkalog.objstore import ObjectStore
from kafkalog.readonly.copies import LogDirCopy

__all__ = ["LAYOUTS", "open_layout", "open_store_for", "redacted"]

#: Layout names a caller may force (``layout=`` / the ``layout`` option).
LAYOUTS: Final = ("logdir",)

_SECRET_WORDS: Final = ("secret", "token", "password", "key", "credential", "sas")


def redacted(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with the value of every key that may hold a secret replaced by ``*********(redacted)``."""
    return {
        k: ("*********(redacted)" if any(w in k.lower() for w in _SECRET_WORDS) else v)
        for k, v in options.items()
    }


def open_store_for(url: str, storage_options: Mapping[str, str]) -> ObjectStore:
    """The object store rooted at ``url`` (:func:`kafkalog.objstore.open_store`, which needs the
    ``kafkalog[cloud]`` extra)."""
    module = importlib.import_module("kafkalog.objstore")
    open_store = getattr(module, "open_store", None)
    if open_store is None:
        raise RemoteStorageError(
            f"{url}: reading object storage needs kafkalog's object-storage support (pip install 'kafkalog[cloud]')"
        )
    store: ObjectStore = open_store(url, dict(storage_options))
    return store


def open_layout(
    url: str,
    storage_options: Mapping[str, str],
    *,
    layout: str | None = None,
    store: ObjectStore | None = None,
) -> RemoteLayout:
    """The layout of the data at ``url`` (``store``: one already open at that root)."""
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if store is None:
        store = open_store_for(url, storage_options)
    return LogDirCopy(store, "")
