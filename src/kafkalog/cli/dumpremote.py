"""``kafkalog dump URL``: dump a file of a partition directory in object storage, read through the storage seam.

A URL names a file the way a local path does, in one of three places (told apart by the directory names, no
request needed):

* a copy of a log dir: ``<prefix>/<topic>-<n>/<file>`` (any file a local partition directory holds);
* an Aiven tiered-storage archive: ``<prefix><topic>-<topicId>/<n>/<file>``, and
* a ``LocalTieredStorage`` archive: ``<prefix><topic>-<n>-<topicId>/<file>``,

where, in an archive, ``<file>`` is a name of the partition directory the reader presents
(:mod:`kafkalog.tiered.view`): ``<20-digit base>.log`` / ``.index`` / ``.timeindex`` / ``.txnindex``,
``<20-digit end + 1>.snapshot``, ``leader-epoch-checkpoint`` — the original Kafka file's bytes, decompressed
(``kafkalog info URL --tree``-style names, as ``verify`` reports them).

Invariants owned here: a ``.log`` (the dumped one, or the one an index is checked against) is **streamed**:
the local dumpers read it through :func:`~kafkalog.cli.dumplog.virtual_files` by ranged reads of the storage
seam (:class:`~kafkalog.objstore.PartitionSource` ``.open``: aligned blocks with read-ahead, or an archive's
chunks), never copied, so memory stays bounded by the seam's caches and the dump's window whatever the
segment's size, and nothing lands on local disk (with ``--max-bytes`` only that much is read). Any other
file (an index, a snapshot, a checkpoint: read whole by its dumper) is copied into a private temporary
directory removed when the dump ends, and only if it is within ``storage.whole.file.max.bytes``. The dumpers
are the local ones and the output is the local output with the URL where the local path would be. Nothing is
written to the store; a storage option's value never appears in output or an error; a file that is not there
exits 66 (``EX_NOINPUT``).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Final

from kafkalog.cli.dumpio import DumpOutput
from kafkalog.cli.dumplog import virtual_files
from kafkalog.errors import RemoteStorageError
from kafkalog.log.names import TopicPartition
from kafkalog.objstore import PartitionSource, RandomAccessFile, open_store
from kafkalog.objstore.ranged import RangedSettings
from kafkalog.readonly.copies import CopiedPartitionSource, partition_of_dir_name
from kafkalog.readonly.remote import PlannedArchive
from kafkalog.tiered import AivenArchive, KeyRing, LocalTieredArchive

__all__ = ["RemoteDumpOutput", "partition_source_of", "staged"]

_UUID: Final = r"[A-Za-z0-9_-]{22}"
_AIVEN_TOPIC_DIR: Final = re.compile(rf"^(?P<topic>.+)-(?P<id>{_UUID})$")
_LOCAL_TIERED_DIR: Final = re.compile(rf"^(?P<topic>.+)-(?P<p>\d{{1,10}})-(?P<id>{_UUID})$")
#: Files an index is checked against: its segment's ``.log``.
_CHECKED_AGAINST_LOG: Final = (".index", ".timeindex", ".txnindex")
#: Files of record batches, dumped as they stream through the seam (never copied).
_STREAMED: Final = (".log", ".checkpoint")
_READ_STEP: Final = 8 << 20


def _split(url: str) -> tuple[str, str]:
    head, _, tail = url.rstrip("/").rpartition("/")
    return head, tail


def partition_source_of(
    url: str, options: Mapping[str, str], key_ring: KeyRing | None = None
) -> tuple[PartitionSource, str]:
    """The partition directory holding the file ``url`` names, and the file's name in it (see the module doc);
    ``FileNotFoundError`` when the URL names no file of a partition directory."""
    dir_url, name = _split(url)
    parent_url, dir_name = _split(dir_url)
    if not name or not dir_name or "://" not in parent_url + "/":
        raise FileNotFoundError(f"{url}: not a file of a partition directory (<dir>/<topic>-<n>/<file>)")
    if dir_name.isdigit():  # Aiven: <prefix><topic>-<topicId>/<n>/
        root_url, topic_dir = _split(parent_url)
        m = _AIVEN_TOPIC_DIR.match(topic_dir)
        if m is not None and "://" in root_url + "/":
            store = open_store(root_url, options)
            aiven = AivenArchive(store, "", topic_ids={m.group("topic"): m.group("id")}, key_ring=key_ring)
            return PlannedArchive(aiven.partition(m.group("topic"), int(dir_name))), name
    m = _LOCAL_TIERED_DIR.match(dir_name)
    if m is not None:
        store = open_store(parent_url, options)
        local = LocalTieredArchive(store, "", topic_ids={m.group("topic"): m.group("id")})
        planned = local.partition(m.group("topic"), int(m.group("p")))
        if planned.segments:
            return PlannedArchive(planned), name
    tp: TopicPartition | None = partition_of_dir_name(dir_name)
    if tp is None:
        raise FileNotFoundError(
            f"{url}: not a file of a partition directory (<topic>-<n>/, <topic>-<topicId>/<n>/ or "
            "<topic>-<n>-<topicId>/)"
        )
    store = open_store(parent_url, options)
    return CopiedPartitionSource(store, dir_name, settings=RangedSettings.from_options(options)), name


def _copy(source: PartitionSource, name: str, target: Path) -> None:
    """``name`` (a small file, read whole by its dumper) into ``target``."""
    f = source.open(name)
    try:
        with open(target, "xb") as out:
            end = f.size
            position = 0
            while position < end:
                data = f.pread(min(_READ_STEP, end - position), position)
                if not data:
                    break
                out.write(data)
                position += len(data)
            out.truncate(f.size)
    finally:
        f.close()


@contextmanager
def staged(
    url: str, options: Mapping[str, str], *, key_ring: KeyRing | None = None
) -> Iterator[tuple[Path, str]]:
    """The file ``url`` names, read through the seam into a private temporary directory (with its segment's
    ``.log`` for an index), as ``(local path, URL of its directory)``; the directory is removed afterwards. A
    ``.log`` (the file, or an index's segment) is not copied: within the context it is a virtual file the
    dumpers stream through the seam (see the module doc; ``--max-bytes`` is the dumper's to honour). Raises
    ``FileNotFoundError`` (the file is not there) and the storage errors of the seam."""
    source, name = partition_source_of(url, options, key_ring)
    files = source.list_files()
    if name not in files:
        raise FileNotFoundError(f"{url}: no such file in {source.name}")
    with tempfile.TemporaryDirectory(prefix="kafkalog-dump-") as tmp:
        os.chmod(tmp, 0o700)
        target = Path(tmp) / name
        stem, dot, suffix = name.partition(".")
        log_name = f"{stem}.log"
        streamed: dict[Path, Callable[[], RandomAccessFile]] = {}
        if name.endswith(_STREAMED):
            streamed[target] = partial(source.open, name)
        else:
            limit = RangedSettings.from_options(options).whole_file_max_bytes
            if files[name] > limit:
                raise RemoteStorageError(
                    f"{url}: {files[name]} bytes, more than storage.whole.file.max.bytes ({limit}) allows for a "
                    "file read whole; raise that storage option if the file is right"
                )
            _copy(source, name, target)
            if dot and f".{suffix}" in _CHECKED_AGAINST_LOG and log_name in files:
                streamed[Path(tmp) / log_name] = partial(source.open, log_name)
        with virtual_files(streamed):
            yield target, _split(url)[0]


class RemoteDumpOutput(DumpOutput):
    """A :class:`DumpOutput` that shows the URL of the dumped file's directory where a dumper prints the
    temporary directory it read from."""

    def __init__(self, inner: DumpOutput, local_dir: Path, url_dir: str) -> None:
        super().__init__(inner.stdout, inner.stderr)
        self._local = str(local_dir)
        self._url = url_dir

    def _shown(self, text: str) -> str:
        return text.replace(self._local, self._url)

    def line(self, text: str) -> None:
        super().line(self._shown(text))

    def error(self, path: Path, message: str) -> None:
        self.flush()
        self.stderr.print(
            f"[bold red]error:[/] {self._escaped(self._shown(str(path)))}: {self._escaped(self._shown(message))}"
        )

    def note(self, text: str) -> None:
        super().note(self._shown(text))

    @staticmethod
    def _escaped(text: str) -> str:
        from rich.markup import escape

        return escape(text)
