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

from collections.abc import Mapping

from kafkalog.objstore.options import resolve
from kafkalog.objstore.store import ObjectStore, forget_shared_memory_store, shared_memory_store


def open_store(url: str, options: Mapping[str, str] | None = None) -> ObjectStore:
    """The store for ``url`` (see the module docstring); ``options`` are storage options (Hadoop's names).

    Raises :class:`~kafkalog.errors.InvalidConfigurationError` for an unsupported scheme or a malformed
    option, :class:`~kafkalog.errors.RemoteStorageError` when a cloud URL needs obstore and it is not
    installed. Opening does no I/O: a wrong bucket or credential shows on the first request.
    """
    cfg = resolve(url, options)  # validates the options whatever the scheme
    if cfg.kind == "memory":
        return shared_memory_store(cfg.prefix)
    if cfg.kind == "file":
        from kafkalog.objstore.local import LocalFileStore

        return LocalFileStore(cfg.prefix or ".", url=url if "://" in url else None)
    from kafkalog.objstore.cloud import open_cloud_store

    return open_cloud_store(url, options)


def forget_memory_store(name: str) -> None:
    """Drop the process-wide ``memory://<name>`` store (tests)."""
    forget_shared_memory_store(name)
