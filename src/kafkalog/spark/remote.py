"""The ``kafkalog`` source over object storage: which options are storage options, the picklable description of
a remote data directory that tasks carry to executors, and :func:`storage_options` (the session's
``spark.hadoop.fs.*`` as source options).

Invariants owned here:

* A Python data source sees only its own options (not the session's conf), so credentials and endpoints
  arrive as options under Hadoop's names (``fs.s3a.endpoint``, ``fs.s3a.access.key``, per-bucket
  ``fs.s3a.bucket.<b>.*``, each also with a ``spark.hadoop.`` prefix) or ``storage.*``; the rest of the
  resolution (precedence, the ``AWS_*`` environment) is :func:`kafkalog.objstore.open_store`'s.
* A :class:`RemoteSpec` is what an executor needs to open the data the driver planned: the URL, the storage
  options, the layout the driver detected (so executors do not list to detect it again), ``tieredPath``,
  the key ring and ``strict``. It pickles with its options (executors need the credentials) but its
  ``repr`` shows no option value, so no plan string, task description or log line from kafkalog shows a
  secret.
* A task over an archive carries its partition as planned on the driver, clipped to the task's segments
  (``ReadTask.view``: :meth:`kafkalog.readonly.log.ReadOnlyLog.restricted`), so executors make no LIST and no
  manifest GET, only ranged reads. Other remote tasks (a log-dir copy) open their spec once per Python worker
  (:func:`open_spec` keeps the last few).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from kafkalog.readonly.log import ReadOnlyDataDir
from kafkalog.tiered.crypto import KeyRing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["STORAGE_OPTION_PREFIXES", "RemoteSpec", "is_storage_option", "open_spec", "storage_options"]

#: Source options that are storage options (handed to :func:`kafkalog.objstore.open_store`).
STORAGE_OPTION_PREFIXES: Final = ("fs.", "spark.hadoop.fs.", "storage.")
#: How many opened remote data directories a Python worker keeps.
_OPEN_SPECS: Final = 8

_open: OrderedDict[RemoteSpec, ReadOnlyDataDir] = OrderedDict()
_open_lock = threading.Lock()


def is_storage_option(key: str) -> bool:
    """Whether a (lower-cased) source option is a storage option."""
    return key.startswith(STORAGE_OPTION_PREFIXES)


@dataclass(frozen=True)
class RemoteSpec:
    """A data directory in object storage, or a local one with a ``tieredPath`` archive (see the module doc)."""

    url: str
    options: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    layout: str | None = None
    tiered_path: str | None = None
    key_ring: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    strict: bool = False

    def __repr__(self) -> str:
        keys = ", ".join(k for k, _ in self.options)
        tiered = "" if self.tiered_path is None else f", tiered_path={self.tiered_path!r}"
        return f"RemoteSpec({self.url!r}, layout={self.layout!r}{tiered}, options=[{keys}])"

    def open(self) -> ReadOnlyDataDir:
        """The data directory (a new one: no cache)."""
        return ReadOnlyDataDir(
            self.url,
            dict(self.options),
            layout=self.layout,
            tiered_path=self.tiered_path,
            # errors name Spark's option, never a key
            key_ring=KeyRing(dict(self.key_ring), option="keyRing") if self.key_ring else None,
            strict=self.strict,
        )

    def with_layout(self, data_dir: ReadOnlyDataDir) -> RemoteSpec:
        """This spec with the layout ``data_dir`` detected (executors then skip the detection)."""
        kind = getattr(data_dir.layout, "kind", None)
        if kind is None or self.layout is not None:
            return self
        return RemoteSpec(self.url, self.options, kind, self.tiered_path, self.key_ring, self.strict)


def open_spec(spec: RemoteSpec) -> ReadOnlyDataDir:
    """The data directory of ``spec``, opened once per process (the last few are kept)."""
    with _open_lock:
        found = _open.get(spec)
        if found is not None:
            _open.move_to_end(spec)
            return found
    data_dir = spec.open()
    with _open_lock:
        _open[spec] = data_dir
        while len(_open) > _OPEN_SPECS:
            _open.popitem(last=False)
    return data_dir


def storage_options(spark: SparkSession | Any) -> dict[str, str]:
    """The session's object-storage settings (``spark.hadoop.fs.*`` of its SparkConf and Hadoop
    configuration) as source options: ``spark.read.format("kafkalog").options(**storage_options(spark))``.
    A Python data source cannot read the session's conf itself; this runs on the driver."""
    found: dict[str, str] = {}
    conf = spark.sparkContext.getConf()
    for key, value in conf.getAll():
        if key.startswith("spark.hadoop.fs."):
            found[key[len("spark.hadoop.") :]] = value
    for key, value in _runtime_conf(spark).items():
        if key.startswith("spark.hadoop.fs."):
            found.setdefault(key[len("spark.hadoop.") :], value)
    return found


def _runtime_conf(spark: Any) -> Mapping[str, str]:
    try:
        items = spark.conf.getAll
    except AttributeError:
        return {}
    result = items() if callable(items) else items
    return dict(result) if isinstance(result, Mapping) else {}
