"""The periodic background tasks of a :class:`~kafkalog.manager.LogManager`, with Kafka's names and settings.

Invariants owned here:

* **Kafka's tasks, Kafka's settings.** ``kafka-log-retention`` (``log.retention.check.interval.ms``),
  ``kafka-log-flusher`` (``log.flush.scheduler.interval.ms``), ``kafka-recovery-point-checkpoint``
  (``log.flush.offset.checkpoint.interval.ms``), ``kafka-log-start-offset-checkpoint``
  (``log.flush.start.offset.checkpoint.interval.ms``) and ``highwatermark-checkpoint``
  (``replica.high.watermark.checkpoint.interval.ms``) first run ``log.initial.task.delay.ms`` after the
  manager opens; an interval of ``0`` or ``Long.MAX_VALUE`` (or more) disables the task.
  ``kafka-delete-logs`` always runs, every second.
* **A task never outlives its manager and never stops the others.** A run after the manager was closed does
  nothing; an exception in a run is logged with its traceback and the next run happens as scheduled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from kafkalog.log.config import LONG_MAX, ManagerConfig
from kafkalog.log.scheduler import ScheduledTask, Scheduler

__all__ = ["Maintained", "schedule_background_tasks"]

_log = logging.getLogger("kafkalog.manager")


class Maintained(Protocol):
    """What the background tasks call (a :class:`~kafkalog.manager.LogManager`)."""

    @property
    def closed(self) -> bool: ...

    def delete_old_segments(self) -> int: ...

    def flush_dirty_logs(self) -> None: ...

    def checkpoint_recovery_points(self) -> None: ...

    def checkpoint_log_start_offsets(self) -> None: ...

    def checkpoint_high_watermarks(self) -> None: ...

    def delete_logs(self) -> None: ...


def schedule_background_tasks(
    target: Maintained, scheduler: Scheduler, config: ManagerConfig
) -> list[ScheduledTask]:
    """Schedule every enabled task on ``scheduler``; cancelling the returned tasks stops them."""
    c, delay = config, config.log_initial_task_delay_ms
    specs: list[tuple[str, Callable[[], object], int]] = [
        ("kafka-log-retention", target.delete_old_segments, c.log_retention_check_interval_ms),
        ("kafka-log-flusher", target.flush_dirty_logs, c.log_flush_scheduler_interval_ms),
        (
            "kafka-recovery-point-checkpoint",
            target.checkpoint_recovery_points,
            c.log_flush_offset_checkpoint_interval_ms,
        ),
        (
            "kafka-log-start-offset-checkpoint",
            target.checkpoint_log_start_offsets,
            c.log_flush_start_offset_checkpoint_interval_ms,
        ),
        (
            "highwatermark-checkpoint",
            target.checkpoint_high_watermarks,
            c.replica_high_watermark_checkpoint_interval_ms,
        ),
    ]
    tasks: list[ScheduledTask] = []
    for name, fn, period in specs:
        if 0 < period < LONG_MAX:
            tasks.append(scheduler.schedule(name, _guarded(target, fn), delay, period))
    tasks.append(scheduler.schedule("kafka-delete-logs", _guarded(target, target.delete_logs), delay, 1000))
    return tasks


def _guarded(target: Maintained, fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        if target.closed:
            return
        try:
            fn()
        except Exception:
            _log.exception("Error in background task %s", getattr(fn, "__name__", fn))

    return run
