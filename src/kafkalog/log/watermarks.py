"""The offsets a partition log publishes and their invariant (Kafka's ``UnifiedLog`` fields ``logStartOffset``,
``highWatermarkMetadata`` and ``firstUnstableOffsetMetadata``).

Invariant owned here (checked by :meth:`Watermarks.check`, which the stateful suites call after every step):

* ``0 <= log_start_offset <= high_watermark <= log_end_offset``;
* ``log_start_offset <= local_log_start_offset <= log_end_offset``: the local log start offset (Kafka's
  ``localLogStartOffset``) is the first offset the local segments serve; below it, down to the log start
  offset, the remote tier serves (KIP-405). A log without a remote tier keeps the two equal;
* the first unstable offset (the first offset of the oldest open or unreplicated transaction, from the
  producer state) is never below the log start offset;
* ``last_stable_offset == min(first_unstable_offset, high_watermark)``.

Every write goes through a method here: moving the log start offset lifts the high watermark to it; moving
the high watermark tells the producer state (completed transactions below it are forgotten) and recomputes
the first unstable offset. The :class:`~kafkalog.log.log.Log` calls these under its lock (this class takes
none); readers take no lock: each field is replaced whole by an immutable value, so a reader sees the old or
the new one. The log end offset belongs to :class:`~kafkalog.log.local_log.LocalLog`; callers pass it in.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalog.storage import LogOffsetMetadata

if TYPE_CHECKING:
    from kafkalog.log.producer_state import ProducerStateManager

__all__ = ["Watermarks"]


class Watermarks:
    """Log start offset, high watermark and first unstable offset of one partition log (see the module doc)."""

    __slots__ = (
        "_first_unstable_offset",
        "_follows_log_end",
        "_high_watermark",
        "_local_log_start_offset",
        "_log_start_offset",
        "_logger",
        "_producer_state",
    )

    def __init__(
        self,
        log_start_offset: int,
        producer_state: ProducerStateManager,
        logger: logging.Logger | logging.LoggerAdapter,  # type: ignore[type-arg]
    ) -> None:
        self._log_start_offset = log_start_offset
        self._local_log_start_offset = log_start_offset
        self._high_watermark = LogOffsetMetadata(log_start_offset)
        self._first_unstable_offset: LogOffsetMetadata | None = None
        self._follows_log_end = False
        self._producer_state = producer_state
        self._logger = logger

    # --- reads --------------------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset the local segments serve (equal to the log start offset without a remote tier)."""
        return self._local_log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.message_offset

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        return self._high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        fuo = self._first_unstable_offset
        return None if fuo is None else fuo.message_offset

    @property
    def first_unstable_offset_metadata(self) -> LogOffsetMetadata | None:
        return self._first_unstable_offset

    @property
    def last_stable_offset(self) -> int:
        """``min(first unstable offset, high watermark)``."""
        hw = self._high_watermark.message_offset
        fuo = self._first_unstable_offset
        if fuo is not None and fuo.message_offset < hw:
            return fuo.message_offset
        return hw

    @property
    def follows_log_end(self) -> bool:
        """Whether every append moves the high watermark to the log end offset (see ``Log.hw_follows_leo``)."""
        return self._follows_log_end

    # --- writes (the caller holds the log's lock) ---------------------------------------------------------
    def set_log_start_offset(self, offset: int, local_log_start_offset: int | None = None) -> None:
        """Move the log start offset (truncation moves it back) and the local log start offset with it
        (``local_log_start_offset``, default ``offset``: a log without a remote tier keeps them equal); a high
        watermark below the log start offset is lifted to it."""
        local = offset if local_log_start_offset is None else local_log_start_offset
        if local < offset:
            raise ValueError(f"local log start offset {local} below the log start offset {offset}")
        self._log_start_offset = offset
        self._local_log_start_offset = local
        if self._high_watermark.message_offset < offset:
            self.set_high_watermark(LogOffsetMetadata(offset))

    def set_local_log_start_offset(self, offset: int) -> None:
        """Move the local log start offset alone (local retention deleted segments the remote tier holds);
        never below the log start offset."""
        if offset < self._log_start_offset:
            raise ValueError(
                f"local log start offset {offset} below the log start offset {self._log_start_offset}"
            )
        self._local_log_start_offset = offset

    def set_high_watermark(self, metadata: LogOffsetMetadata) -> None:
        """Set the high watermark (callers clamp it); the producer state and first unstable offset follow."""
        if metadata.message_offset < 0:
            raise ValueError("high watermark offset should be non-negative")
        if metadata.message_offset < self._high_watermark.message_offset:
            self._logger.warning(
                "Non-monotonic update of high watermark from %s to %s", self._high_watermark, metadata
            )
        self._high_watermark = metadata
        self._producer_state.on_high_watermark_updated(metadata.message_offset)
        self.update_first_unstable_offset()

    def resolve_high_watermark(self, metadata: LogOffsetMetadata) -> None:
        """Keep ``metadata`` (segment and position resolved by a read) if it is still the high watermark's
        offset; nothing else changes."""
        if (
            not metadata.message_offset_only
            and metadata.message_offset == self._high_watermark.message_offset
        ):
            self._high_watermark = metadata

    def set_follows_log_end(self, follows: bool, log_end: LogOffsetMetadata) -> None:
        """Whether the high watermark follows the log end offset; turning it on moves it there now."""
        self._follows_log_end = follows
        if follows:
            self.set_high_watermark(log_end)

    def update_first_unstable_offset(self) -> None:
        """Take the first unstable offset from the producer state (never below the log start offset)."""
        fuo = self._producer_state.first_unstable_offset()
        if fuo is not None and fuo.message_offset < self._log_start_offset:
            fuo = LogOffsetMetadata(self._log_start_offset)
        self._first_unstable_offset = fuo

    def after_append(self, log_end: LogOffsetMetadata) -> int:
        """An append moved the log end offset to ``log_end`` (and the producer state with it): the high
        watermark follows it when it follows the log end, the first unstable offset is taken again. Returns
        the log start offset (what the append reports: one call less on every append)."""
        if self._producer_state.has_unresolved_transactions:
            if self._follows_log_end:
                self.set_high_watermark(log_end)
            else:
                self.update_first_unstable_offset()
        else:
            # No open or unreplicated transaction: the first unstable offset is None and moving the high
            # watermark (forward: it never passes the old log end offset) tells the producer state nothing.
            if self._follows_log_end:
                self._high_watermark = log_end
            self._first_unstable_offset = None
        return self._log_start_offset

    # --- the invariant ------------------------------------------------------------------------------------
    def check(self, log_end_offset: int) -> None:
        """Raise ``AssertionError`` naming the broken rule if the invariant (module doc) does not hold."""
        start = self._log_start_offset
        hw = self._high_watermark.message_offset
        if not 0 <= start <= hw <= log_end_offset:
            raise AssertionError(
                f"log start offset {start} <= high watermark {hw} <= log end offset {log_end_offset} violated"
            )
        local = self._local_log_start_offset
        if not start <= local <= log_end_offset:
            raise AssertionError(
                f"log start offset {start} <= local log start offset {local} <= log end offset {log_end_offset} "
                "violated"
            )
        fuo = self._first_unstable_offset
        if fuo is not None and fuo.message_offset < start:
            raise AssertionError(f"first unstable offset {fuo.message_offset} below log start offset {start}")
        expected = self._producer_state.first_unstable_offset()
        expected_lso = hw if expected is None else max(min(expected.message_offset, hw), start)
        if self.last_stable_offset != expected_lso:
            raise AssertionError(
                f"last stable offset {self.last_stable_offset} != min(first unstable offset "
                f"{None if expected is None else expected.message_offset}, high watermark {hw}) = {expected_lso}"
            )
