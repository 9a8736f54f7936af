"""File names of a partition directory, as Kafka's ``LogFileUtils`` and ``LocalLog`` spell them.

* A segment's files are named after its base offset, formatted with at least 20 digits, zero padded:
  ``00000000000000000000.log``, ``.index``, ``.timeindex``, ``.txnindex``, and producer-state snapshots
  ``<offset>.snapshot`` (named by the exclusive end offset of the state they hold).
* Transient suffixes are appended to the full name: ``.deleted`` (scheduled for deletion), ``.cleaned``
  (output of cleaning or splitting), ``.swap`` (being swapped in), e.g. ``00000000000000000000.log.swap``.
* :func:`offset_from_file_name` parses the digits before the first ``.``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "filename_prefix_from_offset",
    "is_index_file",
    "is_log_file",
    "log_file",
    "offset_from_file_name",
    "offset_index_file",
    "producer_snapshot_file",
    "time_index_file",
    "transaction_index_file",
]

LOG_FILE_SUFFIX: Final = ".log"
INDEX_FILE_SUFFIX: Final = ".index"
TIME_INDEX_FILE_SUFFIX: Final = ".timeindex"
TXN_INDEX_FILE_SUFFIX: Final = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX: Final = ".snapshot"
DELETED_FILE_SUFFIX: Final = ".deleted"
CLEANED_FILE_SUFFIX: Final = ".cleaned"
SWAP_FILE_SUFFIX: Final = ".swap"


def filename_prefix_from_offset(offset: int) -> str:
    """The file name prefix of a segment or snapshot at ``offset`` (20 digits, zero padded)."""
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    return f"{offset:020d}"


def _file(directory: Path | str, offset: int, suffix: str, extra: str) -> Path:
    name = filename_prefix_from_offset(offset) + suffix + extra
    # ``Path / name`` parses only the name; ``Path(directory)`` would parse the whole directory again.
    return (directory if isinstance(directory, Path) else Path(directory)) / name


def log_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.log[suffix]``."""
    return _file(directory, offset, LOG_FILE_SUFFIX, suffix)


def offset_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.index[suffix]``."""
    return _file(directory, offset, INDEX_FILE_SUFFIX, suffix)


def time_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.timeindex[suffix]``."""
    return _file(directory, offset, TIME_INDEX_FILE_SUFFIX, suffix)


def transaction_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.txnindex[suffix]``."""
    return _file(directory, offset, TXN_INDEX_FILE_SUFFIX, suffix)


def producer_snapshot_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.snapshot[suffix]``."""
    return _file(directory, offset, PRODUCER_SNAPSHOT_FILE_SUFFIX, suffix)


def offset_from_file_name(name: str | Path) -> int:
    """The offset encoded in a segment or snapshot file name (the digits before the first ``.``)."""
    base = os.path.basename(os.fspath(name))
    digits = base.split(".", 1)[0]
    if not digits.isdigit():
        raise ValueError(f"not a segment file name: {base!r}")
    return int(digits)


def is_index_file(path: str | Path) -> bool:
    """Whether ``path`` is an offset, time or transaction index (no transient suffix)."""
    name = str(path)
    return name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))


def is_log_file(path: str | Path) -> bool:
    """Whether ``path`` is a ``.log`` segment file (no transient suffix)."""
    return str(path).endswith(LOG_FILE_SUFFIX)
