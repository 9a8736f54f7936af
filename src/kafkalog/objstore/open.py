""":func:`open_store`: one :class:`~kafkalog.objstore.store.ObjectStore` for a URL or a path.

Invariant owned here: the URL's scheme alone picks the implementation —

* ``s3://`` / ``s3a://``, ``gs://``, ``az://`` / ``abfs://`` / ``abfss://`` -> :class:`~kafkalog.objstore.cloud.ObstoreStore`
  (needs the ``kafkalog[cloud]`` extra; options under Hadoop's names, :mod:`kafkalog.objstore.options`);
* ``file://`` and plain paths -> :class:`~kafkalog.objstore.local.LocalFileStore` (no extra needed);
* ``memory://<name>`` -> the process-wide :class:`~kafkalog.objstore.store.MemoryStore` of that name (tests,
  and code that writes an archive in one place and reads it by URL in another) —

and a store's ``url`` / ``repr`` never carry a credential.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from kafkalog.objstore.options import resolve
from kafkalog.objstore.store import MemoryStore, ObjectStore

_memory: dict[str, MemoryStore] = {}
_memory_lock = threading.Lock()


def open_store(url: str, options: Mapping[str, str] | None = None) -> ObjectStore:
    """The store for ``url`` (see the module docstring); ``options`` are storage options (Hadoop's names).

    Raises :class:`~kafkalog.errors.InvalidConfigurationError` for an unsupported scheme or a malformed
    option, :class:`~kafkalog.errors.RemoteStorageError` when a cloud URL needs obstore and it is not
    installed. Opening does no I/O: a wrong bucket or credential shows on the first request.
    """
    cfg = resolve(url, options)  # validates the options whatever the scheme
    if cfg.kind == "memory":
        name = cfg.prefix
        with _memory_lock:
            store = _memory.get(name)
            if store is None:
                store = _memory[name] = MemoryStore(url=f"memory://{name}")
        return store
    if cfg.kind == "file":
        from kafkalog.objstore.local import LocalFileStore

        return LocalFileStore(cfg.prefix or ".", url=url if "://" in url else None)
    from kafkalog.objstore.cloud import open_cloud_store

    return open_cloud_store(url, options)


def registered_memory_store(url: str) -> MemoryStore | None:
    """The process-wide store of ``memory://<name>``, None if there is none."""
    if not url.startswith("memory://"):
        return None
    with _memory_lock:
        return _memory.get(url.removeprefix("memory://").strip("/"))


def forget_memory_store(name: str) -> None:
    """Drop the process-wide ``memory://<name>`` store (tests)."""
    with _memory_lock:
        _memory.pop(name.removeprefix("memory://").strip("/"), None)
