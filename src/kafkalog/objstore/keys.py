"""Object keys: what a key or a listing prefix may look like (the check every store makes before a request).

Invariant owned here: a key is one or more ``/``-separated segments, none empty, ``.`` or ``..``, with no
NUL and no leading ``/``; a listing prefix is empty or such a key followed by ``/``. So a key names
exactly one object below the store's root and can never reach past it: not the root's own name (an empty
key would address the prefix object ``s3://bucket/prefix`` itself), not a parent, not a sibling prefix.
"""

from __future__ import annotations

from kafkalog.errors import RemoteStorageError


def check_key(url: str, key: str) -> str:
    """``key`` if it is a valid object key, else :class:`~kafkalog.errors.RemoteStorageError` naming it."""
    if not key or "\x00" in key or any(p in ("", ".", "..") for p in key.split("/")):
        raise RemoteStorageError(f"{url}: {key!r} is not a valid object key (empty, '.' or '..' segment)")
    return key


def check_prefix(url: str, prefix: str) -> str:
    """``prefix`` if it is empty or a valid key with an optional trailing ``/``, else a typed error."""
    if prefix:
        check_key(url, prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix
