"""Object storage seam: the few operations kafkalog's readers need from S3, GCS, Azure or a local tree.

Invariant owned here: every byte kafkalog reads from object storage goes through an :class:`ObjectStore`
(listing with a delimiter, ``head``, whole and ranged ``get``), so the readers above it never see a
vendor API, and the bytes and requests a query costs are counted in one place (:class:`StoreStats`).
Keys are ``/``-separated and relative to the store's root (the URL's bucket and prefix); a store never
logs or prints a credential (its ``repr`` and every error name the URL without secrets).

Entry point: :func:`open_store` (``s3://``/``s3a://``, ``gs://``, ``az://``/``abfss://`` on obstore, the
``kafkalog[cloud]`` extra; ``file://`` and paths; ``memory://``), with storage options under Hadoop's names
(:mod:`kafkalog.objstore.options`).

This package sits beside ``storage`` in the layers: it imports only :mod:`kafkalog.errors` (and obstore,
lazily).
"""

from kafkalog.objstore.files import PartitionSource, RandomAccessFile
from kafkalog.objstore.open import open_store
from kafkalog.objstore.options import StoreConfig, redact, resolve
from kafkalog.objstore.ranged import RangedFile, RangedSettings, StorePartitionSource, partition_prefixes
from kafkalog.objstore.store import ListResult, MemoryStore, ObjectMeta, ObjectStore, StoreStats

__all__ = [
    "ListResult",
    "MemoryStore",
    "ObjectMeta",
    "ObjectStore",
    "PartitionSource",
    "RandomAccessFile",
    "RangedFile",
    "RangedSettings",
    "StoreConfig",
    "StorePartitionSource",
    "StoreStats",
    "open_store",
    "partition_prefixes",
    "redact",
    "resolve",
]
