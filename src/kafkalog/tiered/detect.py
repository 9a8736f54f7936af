"""Which layout the keys under a prefix are in: a copy of a log directory, an Aiven archive, or a Kafka
``LocalTieredStorage`` archive.

Rules owned here (one LIST of the prefix, and one of the first directory that looks like a partition's or a
topic's, whose children decide: a name can fit two patterns, e.g. a topic ``t-5`` in Aiven's ``t-5-<id>/``):

* ``<topic>-<partition>-<22-char topicId>/`` holding ``<offset>-<uuid>.leader_epoch_checkpoint`` and the
  segment files: ``local-tiered``;
* ``<topic>-<partition>/`` holding ``<20 digits>.log``: ``logdir``;
* ``<topic>-<22-char topicId>/`` holding ``<partition>/`` directories: ``aiven``;
* the prefix itself holding a partition's objects (any of the three kinds): that layout;
* an Iceberg table (``metadata/*.metadata.json``, ``*.puffin``: the Aiven plugin's Iceberg mode) is an
  :class:`~kafkalog.errors.UnsupportedRemoteSegmentError`; anything else an
  :class:`~kafkalog.errors.UnknownArchiveLayoutError` naming what was seen; nothing at all a
  :class:`~kafkalog.errors.RemoteResourceNotFoundError`.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from kafkalog.errors import (
    RemoteResourceNotFoundError,
    UnknownArchiveLayoutError,
    UnsupportedRemoteSegmentError,
)
from kafkalog.objstore.store import ObjectStore
from kafkalog.tiered.files import object_url

__all__ = ["LAYOUTS", "LAYOUT_OPTION", "Layout", "detect_layout"]

Layout = Literal["logdir", "aiven", "local-tiered"]
LAYOUTS: Final[tuple[Layout, ...]] = ("logdir", "aiven", "local-tiered")
#: The option that forces a layout (named in errors).
LAYOUT_OPTION: Final = "layout"
_UUID = r"[A-Za-z0-9_-]{22}"
_LOCAL_TIERED_DIR = re.compile(rf"^.+-\d{{1,10}}-{_UUID}/$")
_LOGDIR_DIR = re.compile(r"^.+-\d{1,10}/$")
_AIVEN_DIR = re.compile(rf"^.+-{_UUID}/$")
_SEGMENT_LOG = re.compile(r"^\d{20}\.log$")
_AIVEN_OBJECT = re.compile(rf"^\d{{20}}-{_UUID}\.(rsm-manifest|log|indexes)$")
_LOCAL_TIERED_OBJECT = re.compile(rf"^\d+-{_UUID}\.(leader_epoch_checkpoint|log|index|timeindex|snapshot)$")


def _leaf(key: str, prefix: str) -> str:
    return key[len(prefix) :]


def _classify_objects(names: list[str]) -> Layout | None:
    """The layout of a partition directory's own objects, if they are one's."""
    if any(f.endswith(".leader_epoch_checkpoint") and _LOCAL_TIERED_OBJECT.match(f) for f in names):
        return "local-tiered"
    if any(_SEGMENT_LOG.match(f) for f in names):
        return "logdir"
    if any(_AIVEN_OBJECT.match(f) for f in names):
        return "aiven"
    return None


def detect_layout(store: ObjectStore, prefix: str = "", *, layout: str | None = None) -> Layout:
    """The layout of the archive under ``prefix`` (``layout`` forces one of :data:`LAYOUTS`)."""
    where = object_url(store, prefix)
    if layout is not None:
        if layout not in LAYOUTS:
            raise UnknownArchiveLayoutError(
                f"{where}: {LAYOUT_OPTION}={layout!r} is not one of {', '.join(LAYOUTS)}"
            )
        return layout
    top = store.list(prefix)
    dirs = [_leaf(p, prefix) for p in top.prefixes]
    files = [_leaf(o.key, prefix) for o in top.objects]
    if not dirs and not files:
        raise RemoteResourceNotFoundError(
            f"{where}: nothing under this prefix (is the bucket or path right?)"
        )
    if "metadata/" in dirs or any(f.endswith((".puffin", ".metadata.json")) for f in files):
        raise UnsupportedRemoteSegmentError(
            f"{where}: an Iceberg table (the Aiven plugin's Iceberg mode, segment.format=iceberg): its records "
            "are Parquet rows, not Kafka segment bytes; kafkalog reads only segment.format=kafka archives"
        )
    layout_here = _classify_objects(files)
    if layout_here is not None:
        return layout_here
    for d in dirs:
        if not (_LOCAL_TIERED_DIR.match(d) or _LOGDIR_DIR.match(d) or _AIVEN_DIR.match(d)):
            continue
        # A directory name can fit two patterns (a topic "t-5" in Aiven's "t-5-<id>/"): its children decide.
        child = store.list(prefix + d)
        if _AIVEN_DIR.match(d) and any(
            re.match(r"^\d{1,10}/$", _leaf(c, prefix + d)) for c in child.prefixes
        ):
            return "aiven"
        found = _classify_objects([_leaf(o.key, prefix + d) for o in child.objects])
        if found in ("logdir", "local-tiered"):
            return found
    seen = sorted(dirs)[:5] + sorted(files)[:5]
    raise UnknownArchiveLayoutError(
        f"{where}: the keys match no layout kafkalog reads (a log-directory copy '<topic>-<partition>/', an "
        f"Aiven archive '<topic>-<topicId>/<partition>/', a LocalTieredStorage archive "
        f"'<topic>-<partition>-<topicId>/'); seen: {seen}; set {LAYOUT_OPTION} to one of {', '.join(LAYOUTS)} "
        "if the prefix is right"
    )
