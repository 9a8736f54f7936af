"""Settings and output channel shared by the file dumpers of ``kafkalog dump`` (``.log`` and the others).

:class:`DumpSettings` is the command line, resolved; :class:`DumpOutput` writes the dump to stdout as UTF-8
bytes (whatever the locale, so it pipes cleanly) and messages to stderr through rich. A dumper is a function
``(path, settings, output) -> exit code`` (:data:`FileDumper`).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, TextIO, cast

from rich.console import Console
from rich.markup import escape

from kafkalog.cli.dumplog import DECODERS, Decoder

__all__ = ["PROGRESS_MIN_BYTES", "DumpOutput", "DumpSettings", "FileDumper", "OutputError", "isatty"]

#: Show a progress bar for files at least this big (when stderr is a terminal and stdout is not).
PROGRESS_MIN_BYTES: Final = 64 << 20


@dataclass(frozen=True, slots=True)
class DumpSettings:
    """The command-line options, resolved (``--print-data-log`` and the decoders imply ``deep``)."""

    deep: bool = False
    print_data: bool = False
    max_bytes: int | None = None
    skip_record_metadata: bool = False
    key_decoder: Decoder = DECODERS["utf8"]
    value_decoder: Decoder = DECODERS["utf8"]
    json: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False


class OutputError(Exception):
    """Writing the dump to stdout failed (other than a closed pipe); ``cause`` is the ``OSError``."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))
        self.cause = cause


class DumpOutput:
    """Where a dump writes: UTF-8 lines to stdout (as bytes, whatever the locale) and messages to stderr.

    ``stdout`` defaults to ``sys.stdout.buffer`` (``sys.stdout`` itself if it has no binary layer).
    """

    def __init__(self, stdout: BinaryIO | TextIO | None = None, stderr: Console | None = None) -> None:
        if stdout is None:
            stdout = getattr(sys.stdout, "buffer", None) or sys.stdout
        self.stdout = stdout
        self._binary = not isinstance(stdout, io.TextIOBase) and not hasattr(stdout, "encoding")
        self.stderr = stderr if stderr is not None else Console(stderr=True, highlight=False, soft_wrap=True)

    def line(self, text: str) -> None:
        """One line of the dump; raises :class:`OutputError` (or ``BrokenPipeError``) if stdout fails."""
        data = text + "\n"
        try:
            if not self._binary:
                cast(TextIO, self.stdout).write(data)
                return
            try:
                raw = data.encode("utf-8", "surrogateescape")  # file names keep their original bytes
            except UnicodeEncodeError:
                raw = data.encode("utf-8", "replace")
            cast(BinaryIO, self.stdout).write(raw)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc) from exc

    def flush(self) -> None:
        """Flushes stdout (before stderr messages, so both streams read in order on a terminal)."""
        try:
            self.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc) from exc

    def error(self, path: Path, message: str) -> None:
        """An error about ``path`` on stderr."""
        self.flush()
        self.stderr.print(f"[bold red]error:[/] {escape(str(path))}: {escape(message)}")

    def note(self, text: str) -> None:
        """A plain note on stderr."""
        self.flush()
        self.stderr.print(escape(text))

    def wants_progress(self, size: int) -> bool:
        """Whether a progress bar helps: a big file, stderr on a terminal, stdout redirected."""
        return size >= PROGRESS_MIN_BYTES and isatty(sys.stderr) and not isatty(sys.stdout)


def isatty(stream: object) -> bool:
    """``stream.isatty()``, False when it has none or fails."""
    check = getattr(stream, "isatty", None)
    try:
        return bool(check()) if callable(check) else False
    except (OSError, ValueError):
        return False


FileDumper = Callable[[Path, DumpSettings, DumpOutput], int]
"""Dumps one file and returns its exit code."""
