"""Fault injection for partition directories: what a crash or a power loss can leave on disk.

Three families of faults, all deterministic given a ``random.Random``:

* **Byte faults** on one file (:func:`cut`, :func:`flip_bits`, :func:`zero_fill`, :func:`garble`,
  :func:`append_bytes`) and helpers that pick the bytes to damage: :func:`crc_covered_ranges` (the bytes of
  each v2 batch that its CRC protects) and :func:`header_field_ranges` (the ones it does not protect).
* **Power loss** (:class:`DurableImage` + :func:`power_loss`): capture the directory right after an fsync
  (``Log.flush``), keep writing, then damage only what changed since — cut it, flip bits in it, zero-fill
  it (a preallocated file whose pages never reached the disk), replace it with garbage, or revert it to
  the image (the writes were lost). Files created after the image may vanish; files deleted after it may
  come back. Whatever was in the image stays byte-for-byte intact: that is the flushed prefix.
* **Crash points** (:func:`crash_after`): run a file protocol (swap, split, delete, truncate...) and let
  the first ``n`` file operations under a directory succeed; operation ``n + 1`` and every later one raise
  :class:`SimulatedCrash`, as if the process died there. Count first with ``crash_at=None`` to learn how
  many operations there are, then crash at every one of them.

Index faults (:func:`corrupt_index`, :func:`delete_index_files`) and the hand-made leftovers of Kafka's
``LogLoaderTest`` (:func:`rename_suffix`) complete the set.
"""

from __future__ import annotations

import contextlib
import os
import random
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.records import MemoryRecords
from kafkalog.records.batch import MAGIC_V2
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.files import log_file, offset_index_file, time_index_file

__all__ = [
    "ATOMIC_FILES",
    "INDEX_CORRUPTIONS",
    "POWER_LOSS_MODES",
    "DurableImage",
    "FsOps",
    "SimulatedCrash",
    "append_bytes",
    "batch_positions",
    "corrupt_index",
    "crash_after",
    "crc_covered_ranges",
    "cut",
    "delete_index_files",
    "fast_tmp_dir",
    "flip_bits",
    "garble",
    "header_field_ranges",
    "initialize_log_dir_with_overflowed_segment",
    "leftovers",
    "power_loss",
    "random_bits",
    "records_of",
    "rename_suffix",
    "zero_fill",
]

# --- byte faults -------------------------------------------------------------------------------------------


def cut(path: Path, position: int) -> None:
    """Truncate ``path`` to ``position`` bytes (a write that never reached the disk)."""
    os.truncate(path, position)


def flip_bits(path: Path, bit_positions: Iterable[int]) -> list[int]:
    """Flip the given bits (``byte * 8 + bit``) of ``path``; returns them."""
    bits = list(bit_positions)
    data = bytearray(path.read_bytes())
    for bit in bits:
        data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))
    return bits


def random_bits(rng: random.Random, ranges: list[tuple[int, int]], count: int) -> list[int]:
    """``count`` distinct bit positions inside the byte ``ranges`` (``[start, end)`` pairs)."""
    total = sum(end - start for start, end in ranges) * 8
    if total <= 0:
        return []
    picks = rng.sample(range(total), min(count, total))
    out = []
    for pick in picks:
        for start, end in ranges:
            width = (end - start) * 8
            if pick < width:
                out.append(start * 8 + pick)
                break
            pick -= width
    return out


def zero_fill(path: Path, start: int, end: int | None = None) -> None:
    """Overwrite ``[start, end)`` with zeros (``end`` past the file's end extends it, like preallocation)."""
    size = path.stat().st_size
    end = size if end is None else end
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(max(0, end - start)))


def garble(path: Path, rng: random.Random, start: int, end: int | None = None) -> None:
    """Overwrite ``[start, end)`` with random bytes (blocks of a lost write holding stale data)."""
    size = path.stat().st_size
    end = size if end is None else end
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(rng.randbytes(max(0, end - start)))


def append_bytes(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (Kafka's ``TestUtils.appendNonsenseToFile``)."""
    with open(path, "ab") as f:
        f.write(data)


def batch_positions(path: Path, start: int = 0) -> list[tuple[int, int]]:
    """``(position, size)`` of every complete v2-looking batch of a ``.log`` from ``start`` (no CRC check)."""
    data = path.read_bytes()
    out = []
    pos = start
    while pos + 17 <= len(data):
        _, length = struct.unpack_from(">qi", data, pos)
        size = length + 12
        if length < 14 or pos + size > len(data):
            break
        out.append((pos, size))
        pos += size
    return out


def crc_covered_ranges(path: Path, start: int = 0) -> list[tuple[int, int]]:
    """Byte ranges of the batches from ``start`` that a v2 CRC protects (attributes to the end)."""
    return [(pos + 21, pos + size) for pos, size in batch_positions(path, start)]


def header_field_ranges(path: Path, start: int = 0, field_name: str = "base_offset") -> list[tuple[int, int]]:
    """Byte ranges of one header field the CRC does not protect: ``base_offset`` (0-7),
    ``partition_leader_epoch`` (12-15) or ``magic`` (16)."""
    lo, hi = {"base_offset": (0, 8), "partition_leader_epoch": (12, 16), "magic": (16, 17)}[field_name]
    return [(pos + lo, pos + hi) for pos, _ in batch_positions(path, start)]


# --- index faults ------------------------------------------------------------------------------------------

#: The ways :func:`corrupt_index` can damage an index file.
INDEX_CORRUPTIONS = ("kafka_spaces", "garbage", "zeros", "partial_entry", "swap_entries", "truncate_to_empty")


def corrupt_index(path: Path, how: str, rng: random.Random) -> None:
    """Damage an index file: ``kafka_spaces`` (Kafka's ``testCorruptIndexRebuild``: the file becomes two
    spaces), ``garbage`` (random bytes, same length), ``zeros``, ``partial_entry`` (length no longer a
    multiple of the entry size), ``swap_entries`` (first and last entry swapped: out of order),
    ``truncate_to_empty``, or ``past_end`` (an ordered extra entry pointing beyond the ``.log``)."""
    data = path.read_bytes()
    entry = 12 if path.name.endswith(".timeindex") else 8
    if how == "kafka_spaces":
        path.write_bytes(b"  ")
    elif how == "garbage":
        path.write_bytes(rng.randbytes(max(len(data), entry * 4)))
    elif how == "zeros":
        path.write_bytes(bytes(max(len(data), entry * 4)))
    elif how == "partial_entry":
        path.write_bytes(data + rng.randbytes(entry // 2))
    elif how == "swap_entries":
        n = len(data) // entry
        if n < 2:
            raise ValueError(f"{path} has {n} entries, cannot swap")
        first, last = data[:entry], data[(n - 1) * entry : n * entry]
        path.write_bytes(last + data[entry : (n - 1) * entry] + first)
    elif how == "truncate_to_empty":
        path.write_bytes(b"")
    elif how == "past_end":
        n = len(data) // entry
        if entry == 8:
            rel = struct.unpack_from(">i", data, (n - 1) * entry)[0] if n else 0
            path.write_bytes(data[: n * entry] + struct.pack(">ii", rel + 1000, 2**30))
        else:
            ts, rel = struct.unpack_from(">qi", data, (n - 1) * entry) if n else (0, 0)
            path.write_bytes(data[: n * entry] + struct.pack(">qi", ts + 1000, rel + 1000))
    else:
        raise ValueError(f"unknown index corruption {how!r}")


def delete_index_files(
    directory: Path, base_offsets: Iterable[int] | None = None, kinds: Iterable[str] = ("index", "timeindex")
) -> list[Path]:
    """Delete ``<base>.<kind>`` files (every segment when ``base_offsets`` is None); returns what was removed."""
    wanted = None if base_offsets is None else {int(b) for b in base_offsets}
    removed = []
    for kind in kinds:
        for path in sorted(directory.glob(f"*.{kind}")):
            if wanted is None or int(path.name.split(".")[0]) in wanted:
                path.unlink()
                removed.append(path)
    return removed


def rename_suffix(directory: Path, base_offset: int, old: str, new: str) -> list[Path]:
    """Rename every file of the segment at ``base_offset`` from suffix ``old`` to ``new`` (e.g. ``""`` to
    ``".swap"``), as Kafka's ``LogSegment.changeFileSuffixes`` does; returns the new paths."""
    prefix = f"{base_offset:020d}."
    out = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if not name.startswith(prefix) or name.endswith(".snapshot"):
            continue
        if old and not name.endswith(old):
            continue
        if not old and name.endswith((".deleted", ".cleaned", ".swap")):
            continue
        stem = name[: -len(old)] if old else name
        target = path.with_name(stem + new)
        os.replace(path, target)
        out.append(target)
    return out


@contextlib.contextmanager
def fast_tmp_dir(fallback: Path) -> Iterator[Path]:
    """A fresh directory on tmpfs (``/dev/shm``) when there is one, else ``fallback``.

    For tests that repeat a scenario hundreds of times: fsync costs milliseconds on a disk and nothing on tmpfs,
    and the crash semantics under test (what a process death leaves) are the same on both.
    """
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        directory = Path(tempfile.mkdtemp(prefix="kafkalog-crash-", dir=shm))
        try:
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    else:
        yield fallback


def leftovers(directory: Path) -> list[str]:
    """Names of transient files (``.deleted``, ``.cleaned``, ``.swap``) in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".deleted", ".cleaned", ".swap")))


# --- power loss --------------------------------------------------------------------------------------------

#: The ways :func:`power_loss` can damage what changed since the image.
POWER_LOSS_MODES = ("revert", "cut", "flip", "zero", "garbage", "mixed")


@dataclass
class DurableImage:
    """Every file of a directory as it was right after an fsync (what a power loss cannot take away)."""

    directory: Path
    files: dict[str, bytes]

    @classmethod
    def capture(cls, directory: Path) -> DurableImage:
        return cls(directory, {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()})

    def first_difference(self, name: str) -> int | None:
        """Where the current file first differs from the image (None if identical or not in the image)."""
        old = self.files.get(name)
        path = self.directory / name
        if old is None or not path.exists():
            return None
        new = path.read_bytes()
        if new == old:
            return None
        n = min(len(old), len(new))
        for i in range(0, n, 4096):
            end = min(i + 4096, n)
            if old[i:end] != new[i:end]:
                j = i
                while old[j] == new[j]:
                    j += 1
                return j
        return n


#: Files replaced atomically (temp file, fsync, rename): after a power loss they are old or new, never torn.
ATOMIC_FILES = ("leader-epoch-checkpoint", "partition.metadata", ".kafka_cleanshutdown")


def power_loss(
    image: DurableImage,
    rng: random.Random,
    mode: str = "mixed",
    *,
    ordered: bool = True,
    protect: Iterable[str] = (),
) -> list[str]:
    """Damage everything that changed in ``image.directory`` since ``image`` (see the module doc).

    ``mode`` is one of :data:`POWER_LOSS_MODES`; ``mixed`` picks one per file. ``flip`` flips bits only in the
    CRC-protected bytes of ``.log`` files (the other header bytes are covered by
    ``test_power_loss.test_flip_in_unprotected_base_offset``).

    ``ordered`` (the default) models a journaling file system, where metadata changes (file creations, sizes)
    reach the disk in order while data pages may not: the segment files created after the image survive as a
    prefix (in base offset order), only the last surviving ``.log`` may lose length (``cut``, ``revert``), and
    the earlier ones keep their size with unflushed pages lost in place (zeros, garbage, flipped bits).
    ``ordered=False`` lets any file vanish or shrink independently, which can leave a hole in the log that no
    recovery can see (a segment that ends cleanly, short of the next one).

    Files in :data:`ATOMIC_FILES` come back old or new; files named in ``protect`` are left alone. Returns
    what was done.
    """
    directory = image.directory
    done: list[str] = []
    protected = set(protect)
    current = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name not in protected)
    gone = set(image.files) - set(current) - protected - set(ATOMIC_FILES)
    for name in [n for n in current if n in ATOMIC_FILES]:
        current.remove(name)
        if name in image.files and rng.random() < 0.5:
            (directory / name).write_bytes(image.files[name])
            done.append(f"{name}: old version")
    logs = [n for n in current if n.endswith(".log")]
    new_logs = [n for n in logs if n not in image.files]
    vanished: set[str] = set()
    if ordered:
        keep = rng.randint(0, len(new_logs))
        vanished = set(new_logs[keep:])
        surviving = [n for n in logs if n not in vanished]
        last_log = surviving[-1] if surviving else None
    for name in current:
        path = directory / name
        how = rng.choice(POWER_LOSS_MODES[:-1]) if mode == "mixed" else mode
        size = path.stat().st_size
        if name in vanished:
            path.unlink()
            done.append(f"{name}: vanished (created after a lost one)")
            continue
        if name not in image.files:
            # Created after the fsync: the file itself may not have reached the disk.
            choice = "keep" if ordered and name.endswith(".log") else rng.choice(("vanish", "keep", how))
            if choice in ("vanish", "revert"):
                path.unlink()
                done.append(f"{name}: vanished")
                continue
            if choice == "keep" and (not ordered or not name.endswith(".log")):
                done.append(f"{name}: kept")
                continue
            if size == 0:
                continue
            start = 0
        else:
            diff = image.first_difference(name)
            if diff is None:
                continue
            start = diff
        if ordered and name.endswith(".log") and name != last_log and how in ("cut", "revert"):
            # Its size reached the disk before the later files were created; only its pages can be lost.
            old = image.files.get(name, b"")
            if how == "revert" and start < len(old):
                with open(path, "r+b") as f:
                    f.seek(start)
                    f.write(old[start : min(len(old), size)])
                start = len(old)
            else:
                start = rng.randint(start, size) if size > start else start
            how = "zero"
        if how == "revert":
            path.write_bytes(image.files[name]) if name in image.files else cut(path, 0)
        elif how == "cut":
            cut(path, rng.randint(start, size) if size > start else start)
        elif how == "flip":
            if name.endswith(".log"):
                ranges = [(max(s, start), e) for s, e in crc_covered_ranges(path) if e > start]
            else:
                ranges = [(start, size)] if size > start else []
            flip_bits(path, random_bits(rng, ranges, rng.randint(1, 3)))
        elif how == "zero":
            zero_fill(path, start)
        elif how == "garbage":
            garble(path, rng, start)
        done.append(f"{name}: {how} from {start} (size {size})")
    for name in sorted(gone):
        # Deleted after the fsync: the unlink (or rename) may not have reached the disk.
        if mode in ("revert", "mixed") and rng.random() < 0.5:
            (directory / name).write_bytes(image.files[name])
            done.append(f"{name}: came back")
    return done


# --- legacy offset overflow (KAFKA-6264) ---------------------------------------------------------------------

_INT_MAX = 2**31 - 1


def initialize_log_dir_with_overflowed_segment(log_dir: Path) -> None:
    """Kafka's ``LogTestUtils.initializeLogDirWithOverflowedSegment``: three segments, the second of which holds
    offsets that overflow its base."""
    log_dir.mkdir(parents=True, exist_ok=True)

    def record(offset: int) -> tuple[bytes, bytes]:
        data = str(offset).encode()
        return (data, data)

    def write_sample_batches(base_offset: int, segment: FileRecords) -> int:
        segment.append(
            MemoryRecords.build([record(base_offset)], base_offset=base_offset, partition_leader_epoch=0)
        )
        segment.append(
            MemoryRecords.build(
                [record(base_offset + 1), record(base_offset + 2)],
                base_offset=base_offset + 1,
                partition_leader_epoch=0,
            )
        )
        segment.append(
            MemoryRecords.build(
                [record(base_offset + _INT_MAX - 1)],
                base_offset=base_offset + _INT_MAX - 1,
                partition_leader_epoch=0,
            )
        )
        # Need to create the offset files explicitly to avoid triggering segment recovery to truncate segment.
        offset_index_file(log_dir, base_offset).touch()
        time_index_file(log_dir, base_offset).touch()
        return base_offset + _INT_MAX

    def write_normal_segment(base_offset: int) -> int:
        segment = FileRecords.open(log_file(log_dir, base_offset))
        try:
            return write_sample_batches(base_offset, segment)
        finally:
            segment.close()

    def write_overflow_segment(base_offset: int) -> int:
        segment = FileRecords.open(log_file(log_dir, base_offset))
        try:
            next_offset = write_sample_batches(base_offset, segment)
            return write_sample_batches(next_offset, segment)
        finally:
            segment.close()

    # We create three segments, the second of which contains offsets which overflow
    next_offset = write_normal_segment(0)
    next_offset = write_overflow_segment(next_offset)
    write_normal_segment(next_offset)


# --- crash points ------------------------------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """The simulated process death of :func:`crash_after` (a ``BaseException``: nothing may handle it)."""


#: Operations :func:`crash_after` counts, by kind.
_PATCHED: dict[str, tuple[str, ...]] = {
    "rename": ("replace", "rename"),
    "unlink": ("unlink", "remove", "rmdir"),
    "write": ("pwrite", "write"),
    "truncate": ("ftruncate", "truncate"),
}


@dataclass
class FsOps:
    """What :func:`crash_after` saw: the operations that ran (kind, function, file name)."""

    crash_at: int | None
    ops: list[tuple[str, str, str]] = field(default_factory=list)
    crashed: bool = False

    @property
    def count(self) -> int:
        return len(self.ops)


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


@contextlib.contextmanager
def crash_after(
    directory: Path, crash_at: int | None, kinds: Iterable[str] = ("rename", "unlink")
) -> Iterator[FsOps]:
    """Let ``crash_at`` file operations of ``kinds`` under ``directory`` run, then crash (see module doc).

    ``crash_at=None`` only counts. Operations on other paths are not affected. The context swallows the
    :class:`SimulatedCrash` it caused (check ``FsOps.crashed``), so the caller can go on to recover.
    """
    root = os.path.realpath(directory)
    state = FsOps(crash_at)
    originals: dict[str, Callable[..., Any]] = {}

    def under_dir(fn_name: str, args: tuple[Any, ...]) -> str | None:
        if not args:
            return None
        first = args[0]
        path = _fd_path(first) if isinstance(first, int) else os.fsdecode(first)
        full = os.path.realpath(path) if path else ""
        return full if full.startswith(root + os.sep) or full == root else None

    def wrap(kind: str, fn_name: str) -> Callable[..., Any]:
        real = originals[fn_name]

        def patched(*args: Any, **kwargs: Any) -> Any:
            path = under_dir(fn_name, args)
            if path is None:
                return real(*args, **kwargs)
            if state.crashed or (state.crash_at is not None and state.count >= state.crash_at):
                state.crashed = True
                raise SimulatedCrash(f"crash before {fn_name}({os.path.basename(path)})")
            state.ops.append((kind, fn_name, os.path.basename(path)))
            return real(*args, **kwargs)

        return patched

    wanted = {k: _PATCHED[k] for k in kinds}
    for fn_names in wanted.values():
        for fn_name in fn_names:
            originals[fn_name] = getattr(os, fn_name)
    try:
        for kind, fn_names in wanted.items():
            for fn_name in fn_names:
                setattr(os, fn_name, wrap(kind, fn_name))
        try:
            yield state
        except SimulatedCrash:
            state.crashed = True
    finally:
        for fn_name, real in originals.items():
            setattr(os, fn_name, real)


def records_of(path: Path) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of every record of the complete batches of a ``.log`` file (no CRC check)."""
    out: list[tuple[int, bytes | None]] = []
    for batch in MemoryRecords(path.read_bytes()).batches():
        if batch.magic == MAGIC_V2 and batch.is_control_batch:
            continue
        out.extend((r.offset, r.value) for r in batch.records())
    return out
