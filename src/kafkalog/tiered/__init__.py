"""Kafka tiered-storage archives (KIP-405) read from object storage, presented as partition directories.

Invariant owned here: every archive layout kafkalog reads — the Aiven plugin's
(``<prefix><topic>-<topicId>/<partition>/<20-digit offset>-<uuid>.{log,indexes,rsm-manifest}``, chunked,
optionally zstd-compressed and AES-GCM-encrypted) and Kafka's ``LocalTieredStorage``
(``<topic>-<partition>-<topicId>/<offset>-<uuid>.<suffix>``) — is presented to the one read-only reader as a
:class:`~kafkalog.objstore.files.PartitionSource`: the files of a Kafka partition directory, with the bytes
Kafka wrote (decrypted, decompressed), never a re-encoding. Segments are chosen from listings and manifests
by Kafka's leader-epoch lineage rules (:mod:`kafkalog.tiered.view`); planning never reads a ``.log`` object
of an archive with segment metadata. Byte formats: ``docs/formats.md`` §"Tiered-storage archives".

Layers: imports :mod:`kafkalog.objstore`, :mod:`kafkalog.records`, :mod:`kafkalog.storage`,
:mod:`kafkalog.errors` and the pure parsers of :mod:`kafkalog.log` (checkpoint files); nothing above ``log``.
"""

from kafkalog.tiered.aiven import AivenArchive, AivenSegment
from kafkalog.tiered.crypto import KeyRing, load_key_ring_file, parse_key_ring_json
from kafkalog.tiered.detect import LAYOUTS, Layout, detect_layout
from kafkalog.tiered.local_tiered import LocalTieredArchive, LocalTieredSegment
from kafkalog.tiered.manifest import SegmentManifest, parse_manifest
from kafkalog.tiered.view import ArchivedSegment, ArchivePartitionSource, Selection

__all__ = [
    "LAYOUTS",
    "AivenArchive",
    "AivenSegment",
    "ArchivePartitionSource",
    "ArchivedSegment",
    "KeyRing",
    "Layout",
    "LocalTieredArchive",
    "LocalTieredSegment",
    "SegmentManifest",
    "Selection",
    "detect_layout",
    "load_key_ring_file",
    "parse_key_ring_json",
    "parse_manifest",
]
