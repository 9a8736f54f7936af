"""``kafkalog dump`` of index files: ``.index``, ``.timeindex`` and ``.txnindex``, checked against their ``.log``.

Text output is Kafka's ``DumpLogSegments`` (``dumpIndex``, ``dumpTimeIndex``, ``dumpTxnIndex``)::

    Dumping 00000000000000000000.index
    offset: 5 position: 4169                  (.index: one line per entry)
    timestamp: 1700000000003 offset: 6        (.timeindex)
    version: 0 producerId: 7 firstOffset: 3 lastOffset: 9 lastStableOffset: 10     (.txnindex)

and, on stderr, index entries that contradict the log in Kafka's words (``Mismatches in :<file>`` /
``  Index offset: 5, log offset: 6``; ``Found timestamp mismatch in :<file>`` / ``  Index timestamp: ..., log
timestamp: ...``; ``Found out of order timestamp in :<file>``; ``The following indexed offsets are not found in
the log.``). As in Kafka the walk stops at the first all-zero slot after the first entry (the unused,
preallocated tail of an active segment's index); ``--verify-index-only`` checks without printing entries,
``--index-sanity-check`` runs only the check a broker runs at startup (``<file> passed sanity check.``).

Checks against the ``.log`` of the same base offset (Kafka's, plus two it cannot make): an ``.index`` entry
``(o, p)`` must point at the start ``p`` of a batch whose last offset is ``o`` (a position inside a batch or past
the log's valid data is reported as such); a ``.timeindex`` entry ``(t, o)`` must name the last offset ``o`` of a
batch whose max timestamp is ``t``, with ``t`` above the previous entry's (checked for every entry; Kafka checks
order only for entries it found); a ``.txnindex`` entry must have ``firstOffset <= lastOffset``, increasing last
offsets, and an ABORT marker of its producer at ``lastOffset`` (Kafka does not check this file). The max timestamp
is the batch header's (Kafka recomputes it from the records; the header is CRC-protected and equal for valid
batches). Without a ``.log`` the entries are printed unchecked (a note says so; ``--verify-index-only`` then
fails with exit 66).

``--json`` (one object per line, keys in this order; the last line of each file is its summary):

* ``.index``: ``{"type":"entry","offset","position"}``; ``{"type":"mismatch","kind","entry","offset","position",
  "logOffset","message"}`` with kind ``offset_mismatch`` | ``no_batch_at_position`` | ``position_past_end``;
  ``{"type":"summary","fileType":"offset_index","baseOffset","entries","unusedSlots","mismatches","fileBytes"}``.
* ``.timeindex``: ``{"type":"entry","timestamp","offset"}``; ``{"type":"mismatch","kind","entry","timestamp",
  "offset","logOffset","logTimestamp","previousTimestamp","message"}`` with kind ``offset_not_found`` |
  ``timestamp_mismatch`` | ``out_of_order`` (fields that do not apply are null); summary with ``"fileType":
  "time_index"`` and the keys of the ``.index`` summary.
* ``.txnindex``: ``{"type":"abortedTxn","version","producerId","firstOffset","lastOffset","lastStableOffset"}``;
  ``{"type":"mismatch","kind","entry","producerId","firstOffset","lastOffset","message"}`` with kind
  ``bad_range`` | ``out_of_order`` | ``marker_not_found``; ``{"type":"summary","fileType":"txn_index","baseOffset",
  "entries","mismatches","fileBytes"}``.
* ``--index-sanity-check``: ``{"type":"sanityCheck","passed","message"}`` then the summary.
* a damaged file: ``{"type":"error","error","position","message"}`` before the summary, ``error`` being
  ``truncated`` (bytes that do not form a whole entry: exit 3) or ``corrupt_index`` (exit 2).

Exit codes: 0 clean; 2 a mismatch, a failed sanity check or a corrupt entry; 3 a partial trailing entry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kafkalog.cli.common import EXIT_CORRUPT, EXIT_NOINPUT, EXIT_OK, EXIT_TRUNCATED, json_dumps
from kafkalog.cli.dumpio import DumpOutput, DumpSettings
from kafkalog.cli.dumplog import virtual_file
from kafkalog.cli.segscan import BatchCursor, control_type_at, iter_fixed_entries
from kafkalog.records import ControlRecordType
from kafkalog.storage.offset_index import OFFSET_ENTRY_SIZE
from kafkalog.storage.time_index import TIME_ENTRY_SIZE
from kafkalog.storage.txn_index import ABORTED_TXN_SIZE

__all__ = ["dump_offset_index", "dump_time_index", "dump_txn_index", "segment_log_for"]

_OFFSET_ENTRY: Final = struct.Struct(">ii")
_TIME_ENTRY: Final = struct.Struct(">qi")
_TXN_ENTRY: Final = struct.Struct(">hqqqq")
_NO_TIMESTAMP: Final = -1
_TRANSIENT: Final = (".deleted", ".cleaned", ".swap")


def segment_log_for(path: Path) -> Path | None:
    """The ``.log`` next to an index file (``X.index`` -> ``X.log``; ``X.index.deleted`` -> ``X.log`` or
    ``X.log.deleted``), or ``None`` if there is none."""
    stem = path.name.split(".", 1)[0]
    candidates = [path.parent / f"{stem}.log"]
    for transient in _TRANSIENT:
        if path.name.endswith(transient):
            candidates.append(path.parent / f"{stem}.log{transient}")
    for candidate in candidates:
        if candidate.is_file() or virtual_file(candidate) is not None:
            return candidate
    return None


def _base_offset(path: Path, out: DumpOutput) -> int:
    stem = path.name.split(".", 1)[0]
    if stem.isdigit():
        return int(stem)
    out.note(f"{path}: the file name does not start with a base offset; assuming 0")
    return 0


@dataclass
class _Mismatches:
    """Mismatches of one file, kept for the stderr report at its end (text output)."""

    lines: list[str] = field(default_factory=list)
    count: int = 0


def _open_cursor(
    path: Path, settings: DumpSettings, out: DumpOutput
) -> tuple[BatchCursor | None, int | None]:
    """The cursor over the index's ``.log``; ``(None, code)`` when there is none and that is fatal."""
    log = segment_log_for(path)
    if log is None:
        stem = path.name.split(".", 1)[0]
        if settings.verify_index_only:
            out.error(path, f"no log segment {stem}.log next to it: nothing to verify the index against")
            return None, EXIT_NOINPUT
        out.note(f"{path}: no log segment {stem}.log next to it; the entries are not checked against the log")
        return None, None
    try:
        return BatchCursor(log), None
    except OSError as exc:
        out.note(f"{log}: {exc.strerror or exc}; the entries are not checked against the log")
        return None, None


def _log_damage_note(cursor: BatchCursor, out: DumpOutput) -> None:
    if cursor.error is not None:
        out.note(
            f"{cursor.path}: the log is damaged at byte {cursor.error.position} ({cursor.error.message}); "
            "entries past that point are reported as not found"
        )


def _trailing(path: Path, size: int, entry_size: int, settings: DumpSettings, out: DumpOutput) -> int:
    """Reports a partial trailing entry; returns its exit code."""
    extra = size % entry_size
    if not extra:
        return EXIT_OK
    position = size - extra
    message = f"{extra} trailing bytes at position {position} do not form a whole {entry_size}-byte entry"
    if settings.json:
        out.line(
            json_dumps({"type": "error", "error": "truncated", "position": position, "message": message})
        )
    out.error(path, f"truncated tail: {message}")
    return EXIT_TRUNCATED


def _sanity_result(
    path: Path, error: str | None, summary: dict[str, object], settings: DumpSettings, out: DumpOutput
) -> int:
    if settings.json:
        out.line(json_dumps({"type": "sanityCheck", "passed": error is None, "message": error}))
        out.line(json_dumps(summary))
    elif error is None:
        out.line(f"{path} passed sanity check.")
    if error is not None:
        out.error(path, error)
        return EXIT_CORRUPT
    return EXIT_OK


def _read_entry(path: Path, struct_: struct.Struct, n: int) -> tuple[int, ...]:
    with open(path, "rb") as f:
        f.seek(n * struct_.size)
        return struct_.unpack(f.read(struct_.size))


# --------------------------------------------------------------------------------------------------- .index


def dump_offset_index(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    """Dumps an offset index (see the module doc)."""
    size = path.stat().st_size
    base = _base_offset(path, out)
    slots = size // OFFSET_ENTRY_SIZE
    if not settings.json:
        out.line(f"Dumping {path}")

    def summary(entries: int, mismatches: int) -> dict[str, object]:
        return {
            "type": "summary",
            "fileType": "offset_index",
            "baseOffset": base,
            "entries": entries,
            "unusedSlots": slots - entries,
            "mismatches": mismatches,
            "fileBytes": size,
        }

    if slots == 0:  # Kafka: "<file> is empty." (before any check)
        if not settings.json:
            out.line(f"{path} is empty.")
        code = _trailing(path, size, OFFSET_ENTRY_SIZE, settings, out)
        if settings.json:
            out.line(json_dumps(summary(0, 0)))
        return code
    if settings.index_sanity_check:
        error = None
        if slots:
            rel, _ = _read_entry(path, _OFFSET_ENTRY, slots - 1)
            if base + rel < base:
                error = (
                    f"Corrupt index found, index file ({path.absolute()}) has non-zero size but the last offset "
                    f"is {base + rel} which is less than the base offset {base}"
                )
        if error is None and size % OFFSET_ENTRY_SIZE:
            error = (
                f"Index file {path.absolute()} is corrupt, found {size} bytes which is neither positive nor a "
                f"multiple of {OFFSET_ENTRY_SIZE}"
            )
        return _sanity_result(path, error, summary(slots, 0), settings, out)

    cursor, fatal = _open_cursor(path, settings, out)
    if fatal is not None:
        return fatal
    mismatches = _Mismatches()
    used = 0
    try:
        for i, raw in iter_fixed_entries(path, OFFSET_ENTRY_SIZE):
            rel, position = _OFFSET_ENTRY.unpack(raw)
            offset = base + rel
            if i > 0 and offset == base:  # the zero-filled, preallocated tail (Kafka stops here too)
                break
            used += 1
            if not settings.verify_index_only:
                if settings.json:
                    out.line(json_dumps({"type": "entry", "offset": offset, "position": position}))
                else:
                    out.line(f"offset: {offset} position: {position}")
            if cursor is not None:
                _check_offset_entry(cursor, i, offset, position, settings, out, mismatches)
    finally:
        if cursor is not None:
            cursor.close()
    if cursor is not None and mismatches.count:
        _log_damage_note(cursor, out)
    if mismatches.lines:
        out.note(f"Mismatches in :{path.absolute()}")
        for line in mismatches.lines:
            out.note(line)
    code = _trailing(path, size, OFFSET_ENTRY_SIZE, settings, out)
    if settings.json:
        out.line(json_dumps(summary(used, mismatches.count)))
    return max(code, EXIT_CORRUPT if mismatches.count else EXIT_OK)


def _check_offset_entry(
    cursor: BatchCursor,
    n: int,
    offset: int,
    position: int,
    settings: DumpSettings,
    out: DumpOutput,
    mismatches: _Mismatches,
) -> None:
    batch = cursor.batch_at(position)
    if batch is not None and batch.last_offset == offset:
        return
    if batch is not None:
        kind, log_offset = "offset_mismatch", batch.last_offset
        message = f"the batch at position {position} ends at offset {log_offset}"
        text = f"  Index offset: {offset}, log offset: {log_offset}"
    else:
        log_offset = None
        last = cursor.current
        end = last.position + last.size_in_bytes if last is not None else 0
        if cursor.done and position >= end:
            kind = "position_past_end"
            message = f"position {position} is past the end of the log's valid data (byte {end})"
        else:
            kind = "no_batch_at_position"
            message = f"no batch starts at position {position}"
        text = f"  Index offset: {offset}, log offset: -1 ({message})"
    mismatches.count += 1
    if settings.json:
        out.line(
            json_dumps(
                {
                    "type": "mismatch",
                    "kind": kind,
                    "entry": n,
                    "offset": offset,
                    "position": position,
                    "logOffset": log_offset,
                    "message": message,
                }
            )
        )
    else:
        mismatches.lines.append(text)


# --------------------------------------------------------------------------------------------------- .timeindex


@dataclass
class _TimeErrors:
    """Kafka's ``TimeIndexDumpErrors``: three lists, printed in this order."""

    mismatch: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    count: int = 0

    def report(self, path: Path, out: DumpOutput) -> None:
        if self.mismatch:
            out.note(f"Found timestamp mismatch in :{path.absolute()}")
            for line in self.mismatch:
                out.note(line)
        if self.out_of_order:
            out.note(f"Found out of order timestamp in :{path.absolute()}")
            for line in self.out_of_order:
                out.note(line)
        if self.not_found:
            out.note("The following indexed offsets are not found in the log.")
            for line in self.not_found:
                out.note(line)


def dump_time_index(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    """Dumps a time index (see the module doc)."""
    size = path.stat().st_size
    base = _base_offset(path, out)
    slots = size // TIME_ENTRY_SIZE
    if not settings.json:
        out.line(f"Dumping {path}")

    def summary(entries: int, mismatches: int) -> dict[str, object]:
        return {
            "type": "summary",
            "fileType": "time_index",
            "baseOffset": base,
            "entries": entries,
            "unusedSlots": slots - entries,
            "mismatches": mismatches,
            "fileBytes": size,
        }

    if settings.index_sanity_check:
        error = None
        if slots:
            first_ts, _ = _read_entry(path, _TIME_ENTRY, 0)
            last_ts, last_rel = _read_entry(path, _TIME_ENTRY, slots - 1)
            if last_ts < first_ts:
                error = (
                    f"Corrupt time index found, time index file ({path.absolute()}) has non-zero size but the last "
                    f"timestamp is {last_ts} which is less than the first timestamp {first_ts}"
                )
            elif base + last_rel < base:
                error = (
                    f"Corrupt time index found, time index file ({path.absolute()}) has non-zero size but the last "
                    f"offset is {base + last_rel} which is less than the first offset {base}"
                )
        if error is None and size % TIME_ENTRY_SIZE:
            error = (
                f"Time index file {path.absolute()} is corrupt, found {size} bytes which is neither positive nor "
                f"a multiple of {TIME_ENTRY_SIZE}"
            )
        return _sanity_result(path, error, summary(slots, 0), settings, out)

    cursor, fatal = _open_cursor(path, settings, out)
    if fatal is not None:
        return fatal
    errors = _TimeErrors()
    used = 0
    previous = _NO_TIMESTAMP
    try:
        for i, raw in iter_fixed_entries(path, TIME_ENTRY_SIZE):
            timestamp, rel = _TIME_ENTRY.unpack(raw)
            offset = base + rel
            if i > 0 and offset == base:  # the zero-filled, preallocated tail (Kafka stops here too)
                break
            used += 1
            if not settings.verify_index_only:
                if settings.json:
                    out.line(json_dumps({"type": "entry", "timestamp": timestamp, "offset": offset}))
                else:
                    out.line(f"timestamp: {timestamp} offset: {offset}")
            if cursor is not None:
                _check_time_entry(cursor, i, timestamp, offset, previous, settings, out, errors)
            previous = timestamp
    finally:
        if cursor is not None:
            cursor.close()
    if cursor is not None and errors.not_found:
        _log_damage_note(cursor, out)
    errors.report(path, out)
    code = _trailing(path, size, TIME_ENTRY_SIZE, settings, out)
    if settings.json:
        out.line(json_dumps(summary(used, errors.count)))
    return max(code, EXIT_CORRUPT if errors.count else EXIT_OK)


def _check_time_entry(
    cursor: BatchCursor,
    n: int,
    timestamp: int,
    offset: int,
    previous: int,
    settings: DumpSettings,
    out: DumpOutput,
    errors: _TimeErrors,
) -> None:
    found: list[tuple[str, int | None, int | None, int | None, str]] = []
    batch = cursor.batch_ending_at_or_after(offset)
    if batch is None or batch.last_offset != offset:
        log_offset = -1 if batch is None else batch.last_offset
        found.append(("offset_not_found", log_offset, None, None, f"no batch ends at offset {offset}"))
        errors.not_found.append(f"Indexed offset: {offset}, found log offset: {log_offset}")
    elif batch.max_timestamp != timestamp:
        found.append(
            (
                "timestamp_mismatch",
                batch.last_offset,
                batch.max_timestamp,
                None,
                f"the batch ending at offset {offset} has max timestamp {batch.max_timestamp}",
            )
        )
        errors.mismatch.append(f"  Index timestamp: {timestamp}, log timestamp: {batch.max_timestamp}")
    if previous >= timestamp:
        found.append(
            (
                "out_of_order",
                None,
                None,
                previous,
                f"timestamp {timestamp} is not above the previous {previous}",
            )
        )
        errors.out_of_order.append(
            f"  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}"
        )
    errors.count += len(found)
    if settings.json:
        for kind, found_offset, log_ts, prev, message in found:
            out.line(
                json_dumps(
                    {
                        "type": "mismatch",
                        "kind": kind,
                        "entry": n,
                        "timestamp": timestamp,
                        "offset": offset,
                        "logOffset": found_offset,
                        "logTimestamp": log_ts,
                        "previousTimestamp": prev,
                        "message": message,
                    }
                )
            )


# --------------------------------------------------------------------------------------------------- .txnindex


def dump_txn_index(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    """Dumps a transaction index (see the module doc)."""
    size = path.stat().st_size
    base = _base_offset(path, out)
    if not settings.json:
        out.line(f"Dumping {path}")
    cursor, fatal = _open_cursor(path, settings, out)
    if fatal is not None:
        return fatal
    log = cursor.path if cursor is not None else None
    mismatches = _Mismatches()
    entries = 0
    code = EXIT_OK
    previous_last: int | None = None
    try:
        for i, raw in iter_fixed_entries(path, ABORTED_TXN_SIZE):
            version, pid, first, last, lso = _TXN_ENTRY.unpack(raw)
            if version != 0:
                message = (
                    f"unexpected aborted transaction version {version} in entry {i} (current version is 0)"
                )
                if settings.json:
                    out.line(
                        json_dumps(
                            {
                                "type": "error",
                                "error": "corrupt_index",
                                "position": i * ABORTED_TXN_SIZE,
                                "message": message,
                            }
                        )
                    )
                out.error(path, message)
                code = EXIT_CORRUPT
                break
            entries += 1
            if not settings.verify_index_only:
                if settings.json:
                    out.line(
                        json_dumps(
                            {
                                "type": "abortedTxn",
                                "version": version,
                                "producerId": pid,
                                "firstOffset": first,
                                "lastOffset": last,
                                "lastStableOffset": lso,
                            }
                        )
                    )
                else:
                    out.line(
                        f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                        f"lastStableOffset: {lso}"
                    )
            problems: list[tuple[str, str]] = []
            if first > last:
                problems.append(("bad_range", f"firstOffset {first} is after lastOffset {last}"))
            if previous_last is not None and last <= previous_last:
                problems.append(
                    ("out_of_order", f"lastOffset {last} is not after the previous {previous_last}")
                )
            previous_last = last
            if cursor is not None and log is not None:
                why = _abort_marker_problem(cursor, log, pid, last)
                if why is not None:
                    problems.append(("marker_not_found", why))
            for kind, message in problems:
                mismatches.count += 1
                if settings.json:
                    out.line(
                        json_dumps(
                            {
                                "type": "mismatch",
                                "kind": kind,
                                "entry": i,
                                "producerId": pid,
                                "firstOffset": first,
                                "lastOffset": last,
                                "message": message,
                            }
                        )
                    )
                else:
                    mismatches.lines.append(
                        f"  Aborted transaction of producer {pid} (firstOffset {first}, lastOffset {last}): {message}"
                    )
    finally:
        if cursor is not None:
            cursor.close()
    if mismatches.lines:
        out.note(f"Mismatches in :{path.absolute()}")
        for line in mismatches.lines:
            out.note(line)
    if code == EXIT_OK:
        code = _trailing(path, size, ABORTED_TXN_SIZE, settings, out)
    if settings.json:
        out.line(
            json_dumps(
                {
                    "type": "summary",
                    "fileType": "txn_index",
                    "baseOffset": base,
                    "entries": entries,
                    "mismatches": mismatches.count,
                    "fileBytes": size,
                }
            )
        )
    return max(code, EXIT_CORRUPT if mismatches.count else EXIT_OK)


def _abort_marker_problem(cursor: BatchCursor, log: Path, producer_id: int, offset: int) -> str | None:
    """Why the log has no ABORT marker of ``producer_id`` at ``offset`` (``None`` if it has one)."""
    batch = cursor.batch_ending_at_or_after(offset)
    if batch is None or batch.base_offset > offset:
        return f"no batch holds offset {offset} in {log.name}"
    if not batch.is_control_batch:
        return f"offset {offset} is in a data batch, not a transaction marker"
    if batch.producer_id != producer_id:
        return f"the marker at offset {offset} belongs to producer {batch.producer_id}"
    control = control_type_at(log, batch.position, batch.size_in_bytes)
    if control is not ControlRecordType.ABORT:
        name = "unreadable" if control is None else control.name
        return f"the marker at offset {offset} is {name}, not ABORT"
    return None
