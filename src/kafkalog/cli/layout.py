"""``kafkalog info DIR --tree``: a data directory's layout as a text tree, each file with what it holds.

One line per file or directory, drawn like ``tree(1)`` (entries in name order, so the picture is stable), each file followed by its size and a summary read from its contents:

* ``NNNNNNNNNNNNNNNNNNNN.log`` — a segment: the offsets it holds, its batches and records;
* ``.index`` / ``.timeindex`` — offset / time index entries (8 / 12 bytes each);
* ``.txnindex`` — aborted transactions (34 bytes each);
* ``.snapshot`` — a producer-state snapshot: the producers it lists;
* ``leader-epoch-checkpoint`` and the offset checkpoints — their entries;
* ``partition.metadata`` — the topic id file (the id itself is not printed: it is random per topic);
* ``kafkalog-topics.json`` — the topics it declares;
* anything else — its size only.

The summaries never print a wall-clock time or a topic id, so the same records give the same tree (the README's
picture is :func:`example_tree`, printed by ``python -m kafkalog.cli.layout``; ``tests/test_readme.py`` checks
that it has not drifted).
A file that cannot be read is shown with ``unreadable: <reason>`` instead of a summary; symbolic links, FIFOs
and devices are named, never opened or followed; nothing is written.
"""

from __future__ import annotations

import json
import stat
import tempfile
from pathlib import Path
from typing import Final

from kafkalog.cli.common import plural
from kafkalog.errors import KafkaError
from kafkalog.log import AppendOrigin
from kafkalog.log.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    PARTITION_METADATA_FILE,
    leader_epoch_checkpoint,
    offset_checkpoint,
)
from kafkalog.log.producer_state import read_snapshot
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.storage.file_records import FileRecords
from kafkalog.time import MockTime

__all__ = ["EXAMPLE_TIMESTAMP", "describe_file", "example_tree", "render_tree", "write_example"]

#: The record timestamps (and the clock) of :func:`write_example`: 2023-11-14T22:13:20Z.
EXAMPLE_TIMESTAMP: Final = 1_700_000_000_000

_OFFSET_CHECKPOINTS: Final = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_ENTRY_BYTES: Final = {".index": (8, "offset index"), ".timeindex": (12, "time index")}
_TXN_ENTRY_BYTES: Final = 34


def _size(n: int) -> str:
    return (
        plural(n, "byte", "bytes")
        if n < 1024
        else f"{n / 1024:.1f} KiB"
        if n < 1 << 20
        else f"{n / 2**20:.1f} MiB"
    )


def _segment(path: Path) -> str:
    records = FileRecords.open(path, mutable=False, file_already_exists=True)
    try:
        batches = 0
        first = last = -1
        for batch in records.batches():
            if batches == 0:
                first = batch.base_offset
            last = batch.last_offset
            batches += 1
    finally:
        records.close()
    if batches == 0:
        return "segment: empty"
    return f"segment: offsets {first}..{last}, {plural(batches, 'batch', 'batches')}"


def describe_file(path: Path) -> str:
    """What ``path`` holds, in a few words (``unreadable: ...`` when its contents cannot be read). A symbolic
    link, FIFO or device is named as such and never opened (a FIFO would block, a link may leave the
    directory)."""
    name = path.name
    try:
        mode = path.lstat().st_mode
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if stat.S_ISLNK(mode):
        return "symbolic link (not followed)"
    if not stat.S_ISREG(mode):
        return "not a regular file (not opened)"
    suffix = path.suffix
    try:
        if suffix == ".log":
            return _segment(path)
        if suffix in _ENTRY_BYTES:
            width, what = _ENTRY_BYTES[suffix]
            return f"{what}: {plural(path.stat().st_size // width, 'entry', 'entries')}"
        if suffix == ".txnindex":
            n = path.stat().st_size // _TXN_ENTRY_BYTES
            return f"transaction index: {plural(n, 'aborted transaction', 'aborted transactions')}"
        if suffix == ".snapshot":
            return f"producer snapshot: {plural(len(read_snapshot(path)), 'producer', 'producers')}"
        if name == LEADER_EPOCH_CHECKPOINT_FILE:
            entries = leader_epoch_checkpoint(path.parent).read()
            epochs = ", ".join(f"epoch {e.epoch} from offset {e.start_offset}" for e in entries)
            return f"leader epochs: {epochs or 'none'}"
        if name in _OFFSET_CHECKPOINTS:
            offsets = sorted((str(tp), o) for tp, o in offset_checkpoint(path).read())
            listed = ", ".join(f"{tp}={o}" for tp, o in offsets)
            return plural(len(offsets), "entry", "entries") + (f": {listed}" if listed else "")
        if name == PARTITION_METADATA_FILE:
            return "topic id of this partition"
        if name == CLEAN_SHUTDOWN_FILE:
            return "clean-shutdown marker"
        if name == ".lock":
            return "held by the process that has the directory open"
        if name == "kafkalog-topics.json":
            doc = json.loads(path.read_text(encoding="utf-8"))
            topics = doc.get("topics", {})
            parts = [
                f"{t} ({plural(int(m.get('partitions', 0)), 'partition', 'partitions')})"
                for t, m in topics.items()
            ]
            return "topics: " + (", ".join(sorted(parts)) or "none")
    except (KafkaError, OSError, ValueError, AttributeError) as exc:
        return f"unreadable: {exc}"
    return ""


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _walk(directory: Path, prefix: str, out: list[tuple[str, str]]) -> None:
    children = sorted(directory.iterdir(), key=lambda p: p.name)
    for i, child in enumerate(children):
        last = i == len(children) - 1
        branch = prefix + ("└── " if last else "├── ")
        if _is_dir(child):
            out.append((f"{branch}{child.name}/", ""))
            _walk(child, prefix + ("    " if last else "│   "), out)
        else:
            summary = describe_file(child)
            size = _size(child.lstat().st_size)
            out.append((f"{branch}{child.name}", f"{size:>10}" + (f"  {summary}" if summary else "")))


def render_tree(directory: Path, name: str | None = None) -> list[str]:
    """The lines of ``directory``'s tree (a file: its name, size and :func:`describe_file`, in aligned columns);
    the root is shown as ``name`` (default: the path as given). Symbolic links are not followed."""
    rows: list[tuple[str, str]] = [(f"{name if name is not None else directory}/", "")]
    _walk(directory, "", rows)
    width = max(len(left) for left, right in rows if right) if len(rows) > 1 else 0
    return [f"{left:<{width}}{right}".rstrip() if right else left for left, right in rows]


def write_example(data_dir: Path) -> None:
    """Writes the README's small data directory into ``data_dir`` (which must not exist): topic ``orders`` with
    two partitions and batches with fixed timestamps (three segments in partition 0; in partition 1 an
    idempotent producer and an aborted transaction too), closed cleanly."""
    clock = MockTime(EXAMPLE_TIMESTAMP)
    with LogManager.open(data_dir, time=clock, background=False) as mgr:
        mgr.create_topic("orders", 2, {"segment.bytes": 1024, "index.interval.bytes": 128})
        for n in range(12):
            records = [
                SimpleRecord(
                    b'{"order": %d, "item": %d}' % (n, i),
                    key=b"user-%d" % (n % 3),
                    timestamp=clock.milliseconds(),
                )
                for i in range(5)
            ]
            mgr.produce("orders", records, partition=0 if n % 4 else 1)
            clock.sleep(1000)
        log = mgr.get_log("orders", 1)  # an idempotent producer, and a transaction that aborts
        now = clock.milliseconds()
        idempotent = [SimpleRecord(b'{"refund": %d}' % i, key=b"user-1", timestamp=now) for i in range(2)]
        log.append_as_leader(
            MemoryRecords.build(idempotent, producer_id=1000, producer_epoch=0, base_sequence=0, now_ms=now)
        )
        aborted = [SimpleRecord(b'{"order": 99}', key=b"user-2", timestamp=now)]
        log.append_as_leader(
            MemoryRecords.build(
                aborted,
                producer_id=2000,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
                now_ms=now,
            )
        )
        marker = MemoryRecords.end_transaction_marker(
            producer_id=2000, producer_epoch=0, control_type="ABORT", coordinator_epoch=0, timestamp=now
        )
        log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)


def example_tree() -> list[str]:
    """The README's picture: :func:`write_example` in a temporary directory, drawn with its root named ``data``."""
    with tempfile.TemporaryDirectory(prefix="kafkalog-layout-") as tmp:
        data_dir = Path(tmp) / "data"
        write_example(data_dir)
        return render_tree(data_dir, "data")


if __name__ == "__main__":  # python -m kafkalog.cli.layout: print the README's picture (make readme-layout)
    print("\n".join(example_tree()))
